"""The launcher: job lifecycle (pure), exit-code policy, PAI_* environment, and the loop that drives
scheduler + store + agents."""
