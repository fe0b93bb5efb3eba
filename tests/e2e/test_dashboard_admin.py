"""The dashboard's admin area in real headless Chromium against a real master and agent (process runtime).

An admin creates a VC and its share from the dashboard (an invalid share shows the API's own error, and changes
nothing), creates a user granted that VC, and that user then runs a job in it (submitted with the user's token);
the user sees no admin link, and an admin page refuses them. The admin also makes and unmakes an admin, sets a
user's VCs and password, creates, edits and deletes storages and groups (their grants), and creates an application
token. Screenshots under ``$PAI_TEST_ARTIFACTS/dashboard``; no page may throw a JavaScript error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from pai.cli.api import MasterApi
from pai.cli.http import HttpClient
from tests.e2e.browser import WAIT_MS, shot, sign_in
from tests.e2e.harness import ADMIN_PASSWORD, Cluster, cluster

CAROL = ("carol", "carol-password")

JOB = """protocolVersion: 2
name: in-team
type: job
defaults: {virtualCluster: team}
prerequisites:
  - {type: dockerimage, name: img, uri: busybox}
taskRoles:
  main:
    instances: 1
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0}
    commands: ['echo in team']
"""


@pytest.fixture(scope="module")
def admin_dash(tmp_path_factory: pytest.TempPathFactory, pw: Any) -> Iterator[Cluster]:
    with cluster(tmp_path_factory.mktemp("dashboard-admin"), None, [("node-a", "127.0.0.2", 2)]) as c:
        yield c


def fill(page: Any, form: str, values: dict[str, str]) -> None:
    for name, value in values.items():
        page.fill(f"form.{form} input[name={name}]", value)
    page.click(f"form.{form} button[type=submit]")


def test_an_admin_makes_a_vc_and_a_user_who_runs_a_job_in_it(admin_dash: Cluster, page: Any, pw: Any) -> None:
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    sign_in(page, admin_dash.url, "admin", ADMIN_PASSWORD, expect)
    page.click("nav a[data-page=admin]")
    expect(page.locator("a.tab.active[data-tab=users]")).to_be_visible()

    page.click("a.tab[data-tab=vcs]")
    fill(page, "vc-share", {"vc": "team", "vcCapacity": "50", "vcMaxCapacity": "100"})
    expect(page.locator("form.vc-share .form-note.ok")).to_contain_text("Create virtual cluster team")
    expect(page.locator("tr[data-vc=team]")).to_contain_text("50%")
    fill(page, "vc-share", {"vc": "team", "vcCapacity": "80", "vcMaxCapacity": "40"})  # max below the guarantee
    expect(page.locator("form.vc-share .form-note.error")).to_have_text(
        "InvalidParametersError: vcMaxCapacity: must not be less than vcCapacity")
    fill(page, "vc-share", {"vc": "team", "vcCapacity": "120", "vcMaxCapacity": "100"})
    expect(page.locator("form.vc-share .form-note.error")).to_have_text(
        "InvalidParametersError: vcCapacity: must be a number from 0 to 100")
    shot(page, "admin-vcs")
    team = admin_dash.api.http.json("GET", "/api/v2/virtual-clusters/team")
    assert (team["capacity"], team["maxCapacity"]) == (50, 100)  # the refused shares changed nothing

    page.click("a.tab[data-tab=users]")
    page.check("form.create-user input[name=vc][value=team]")
    fill(page, "create-user", {"username": CAROL[0], "password": CAROL[1]})
    expect(page.locator("form.create-user .form-note.ok")).to_contain_text("Created carol")
    expect(page.locator("tr[data-user=carol]")).to_contain_text("team")
    fill(page, "create-user", {"username": CAROL[0], "password": CAROL[1]})  # again: the API's conflict
    expect(page.locator("form.create-user .form-note.error")).to_contain_text("ConflictUserError: ")
    shot(page, "admin-users")

    page.click("#logout")
    expect(page.locator("form.login")).to_be_visible()  # signed out (two requests first): then a new page load
    sign_in(page, admin_dash.url, *CAROL, expect)
    expect(page.locator("nav a[data-page=nodes]")).to_be_visible()
    expect(page.locator("nav a[data-page=admin]")).to_be_hidden()
    page.goto(admin_dash.url + "/#/admin/users")
    expect(page.locator("p.refusal")).to_have_text("carol is not an admin: only admins administer the cluster.")
    expect(page.locator("form.create-user")).to_have_count(0)
    shot(page, "admin-refused")

    carol = MasterApi(HttpClient(admin_dash.url, timeout=10))
    carol.http.token = carol.login(*CAROL)["token"]
    key = carol.submit(JOB.encode(), "text/yaml")["jobName"]
    assert key == "carol~in-team"
    assert carol.job(key)["jobStatus"]["virtualCluster"] == "team"
    admin_dash.wait_state(key, {"SUCCEEDED"})


def test_an_admin_manages_admins_storages_groups_and_tokens(admin_dash: Cluster, page: Any, pw: Any) -> None:
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    admin_dash.api.create_user({"username": "dave", "password": "dave-password"})
    sign_in(page, admin_dash.url, "admin", ADMIN_PASSWORD, expect)
    page.goto(admin_dash.url + "/#/admin/users")
    dave = page.locator("tr[data-user=dave]")
    dave.locator("button[data-action=admin]").click()
    expect(dave.locator(".tag")).to_have_text("admin")
    assert admin_dash.api.user("dave")["admin"] is True
    dave.locator("button[data-action=admin]").click()
    expect(dave.locator(".tag")).to_have_count(0)
    assert admin_dash.api.user("dave")["admin"] is False
    dave.locator("button[data-action=edit]").click()
    editor = page.locator("section.user-editor[data-user=dave]")
    editor.locator("form.user-vcs input[value=team]").check()
    editor.locator("form.user-vcs button[type=submit]").click()
    expect(editor.locator("form.user-vcs .form-note.ok")).to_have_text("The VCs of dave saved.")
    expect(dave).to_contain_text("default, team")
    editor.locator("form.user-password input[name=newPassword]").fill("dave-new-password")
    editor.locator("form.user-password button[type=submit]").click()
    expect(editor.locator("form.user-password .form-note.ok")).to_have_text("The password of dave saved.")
    assert MasterApi(HttpClient(admin_dash.url, timeout=10)).login("dave", "dave-new-password")["user"] == "dave"

    page.click("a.tab[data-tab=storages]")
    page.check("form.storage input[name=readOnly]")
    fill(page, "storage", {"name": "scratch", "path": "/srv/scratch"})
    row = page.locator("tr[data-storage=scratch]")
    expect(row).to_contain_text("/srv/scratch")
    expect(row).to_contain_text("read-only")
    fill(page, "storage", {"name": "scratch", "path": "relative/path"})
    expect(page.locator("form.storage .form-note.error")).to_contain_text("InvalidParametersError: path: ")
    expect(row).to_contain_text("/srv/scratch")
    fill(page, "storage", {"name": "gone", "path": "/srv/gone"})
    page.once("dialog", lambda d: d.accept())
    page.locator("tr[data-storage=gone] button[data-action=delete]").click()
    expect(page.locator("tr[data-storage=gone]")).to_have_count(0)
    shot(page, "admin-storages")

    page.click("a.tab[data-tab=groups]")
    page.check("form.create-group input[name=vc][value=team]")
    page.check("form.create-group input[name=storage][value=scratch]")
    fill(page, "create-group", {"groupname": "vision", "description": "the vision team"})
    group = page.locator("tr[data-group=vision]")
    expect(group).to_contain_text("VCs: team")
    expect(group).to_contain_text("storages: scratch")
    group.locator("button[data-action=edit]").click()
    editor = page.locator("section.group-editor[data-group=vision]")
    expect(editor).to_contain_text("nobody")  # its members
    editor.locator("input[name=vc][value=team]").uncheck()
    editor.locator("button[type=submit]").click()
    expect(group).not_to_contain_text("VCs:")
    got = admin_dash.api.http.json("GET", "/api/v2/groups/vision")
    assert got["extension"]["acls"]["virtualClusters"] == [] and got["description"] == "the vision team"
    shot(page, "admin-groups")

    page.click("a.tab[data-tab=tokens]")
    expect(page.locator("tr[data-token] .tag")).to_have_text("this tab")
    before = page.locator("tr[data-token]").count()
    page.click("form.app-token button[type=submit]")
    expect(page.locator("code.new-token")).to_have_text(re.compile(r"^\S{20,}$"))
    expect(page.locator("tr[data-token]")).to_have_count(before + 1)
    shot(page, "admin-tokens")
