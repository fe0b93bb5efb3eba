from pai.main import main

main()
