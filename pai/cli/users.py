"""``pai user …`` and ``pai group …``: OpenPAI's users and groups. Reading needs a login; changes need an admin,
except a user's own password and e-mail."""

from __future__ import annotations

from typing import Any

import click

from pai.cli.command import client_command, connect, master_option
from pai.cli.output import OutputFormat, output_option, render_table

USER_HEADERS = ("USERNAME", "ADMIN", "GROUPS", "VIRTUAL CLUSTERS", "EMAIL")
GROUP_HEADERS = ("GROUPNAME", "GRANTS", "DESCRIPTION")


def render_users(users: Any) -> str:
    rows = [(u.get("username"), "yes" if u.get("admin") else "no", ",".join(u.get("grouplist") or []),
             ",".join(u.get("virtualCluster") or []), u.get("email") or "-")
            for u in (users if isinstance(users, list) else [users])]
    return render_table(USER_HEADERS, rows)


def grants(group: dict[str, Any]) -> str:
    """What a group's ``extension.acls`` grants, in words."""
    acls = (group.get("extension") or {}).get("acls") or {}
    parts = ["admin"] if acls.get("admin") else []
    if acls.get("virtualClusters"):
        parts.append("VCs " + ",".join(acls["virtualClusters"]))
    if acls.get("storageConfigs"):
        parts.append("storages " + ",".join(acls["storageConfigs"]))
    return "; ".join(parts) or "-"


def render_groups(groups: Any) -> str:
    rows = [(g.get("groupname"), grants(g), g.get("description") or "-")
            for g in (groups if isinstance(groups, list) else [groups])]
    return render_table(GROUP_HEADERS, rows)


@click.group("user")
def user() -> None:
    """Users: list, show, create, change and delete them (OpenPAI's user API)."""


@client_command("list")
@output_option
@master_option
def user_list(output: OutputFormat, master: str | None) -> None:
    """List users with their groups and virtual clusters."""
    output.emit(connect(master).api.users(), render_users)


@client_command("show")
@click.argument("name")
@output_option
@master_option
def user_show(name: str, output: OutputFormat, master: str | None) -> None:
    """Show user NAME."""
    output.emit(connect(master).api.user(name), render_users)


@client_command("create")
@click.argument("name")
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True,
              help="At least 6 characters (prompted for when left out).")
@click.option("--email", default="", help="The user's e-mail address.")
@click.option("--admin", is_flag=True, help="Make the user an admin (a member of admingroup).")
@click.option("--vc", "vcs", multiple=True, metavar="VC", help="A virtual cluster the user may use (repeatable).")
@master_option
def user_create(name: str, password: str, email: str, admin: bool, vcs: tuple[str, ...], master: str | None) -> None:
    """Create user NAME (admins only). Every user may use the default VC; --vc adds others."""
    body: dict[str, Any] = {"username": name, "password": password, "admin": admin, "virtualCluster": list(vcs)}
    if email:
        body["email"] = email
    connect(master).api.create_user(body)
    click.echo(f"user {name} created")


@client_command("set")
@click.argument("name")
@click.option("--email", default=None, help="A new e-mail address.")
@click.option("--admin/--no-admin", default=None, help="Make the user an admin, or no longer one.")
@click.option("--vc", "vcs", multiple=True, metavar="VC",
              help="Replace the user's virtual clusters with these (repeatable).")
@master_option
def user_set(name: str, email: str | None, admin: bool | None, vcs: tuple[str, ...], master: str | None) -> None:
    """Change user NAME (admins only): e-mail, admin, virtual clusters. What is not given stays."""
    data: dict[str, Any] = {"username": name}
    if email is not None:
        data["email"] = email
    if admin is not None:
        data["admin"] = admin
    if vcs:
        data["virtualCluster"] = list(vcs)
    if len(data) == 1:
        raise click.UsageError("nothing to change: give --email, --admin/--no-admin or --vc")
    connect(master).api.update_user(data)
    click.echo(f"user {name} updated")


@client_command("passwd")
@click.argument("name", required=False)
@click.option("--old-password", default=None, help="Your current password (needed to change your own).")
@click.option("--new-password", prompt=True, hide_input=True, confirmation_prompt=True,
              help="The new password (prompted for when left out).")
@master_option
def user_passwd(name: str | None, old_password: str | None, new_password: str, master: str | None) -> None:
    """Change the password of NAME (default: yourself). Your login tokens end; log in again."""
    conn = connect(master)
    target = name or conn.session.user
    if not target:
        raise click.UsageError("name the user (you are not logged in as anyone)")
    body = {"newPassword": new_password, **({"oldPassword": old_password} if old_password is not None else {})}
    conn.api.user_call("PUT", target, "password", body)
    click.echo(f"password of {target} changed")


@client_command("delete")
@click.argument("name")
@master_option
def user_delete(name: str, master: str | None) -> None:
    """Delete user NAME (admins only; an admin must be demoted first). Their jobs stay."""
    connect(master).api.user_call("DELETE", name)
    click.echo(f"user {name} deleted")


@client_command("join")
@click.argument("name")
@click.argument("group")
@master_option
def user_join(name: str, group: str, master: str | None) -> None:
    """Add user NAME to GROUP (admins only)."""
    connect(master).api.user_call("PUT", name, "group", {"groupname": group})
    click.echo(f"user {name} is in group {group}")


@client_command("leave")
@click.argument("name")
@click.argument("group")
@master_option
def user_leave(name: str, group: str, master: str | None) -> None:
    """Remove user NAME from GROUP (admins only)."""
    connect(master).api.user_call("DELETE", name, "group", {"groupname": group})
    click.echo(f"user {name} is no longer in group {group}")


for _command in (user_list, user_show, user_create, user_set, user_passwd, user_delete, user_join, user_leave):
    user.add_command(_command)


@click.group("group")
def group() -> None:
    """Groups: what they grant (admin, virtual clusters, storages) and who is in them (OpenPAI's group API)."""


@client_command("list")
@output_option
@master_option
def group_list(output: OutputFormat, master: str | None) -> None:
    """List groups and what each grants."""
    output.emit(connect(master).api.groups(), render_groups)


@client_command("show")
@click.argument("name")
@output_option
@master_option
def group_show(name: str, output: OutputFormat, master: str | None) -> None:
    """Show group NAME and (for admins) its members."""
    api = connect(master).api
    found = api.group_call("GET", name)
    if output is OutputFormat.JSON:
        output.emit(found, render_groups)
        return
    click.echo(render_groups(found))
    members = api.group_call("GET", name, "userlist")
    click.echo("members: " + (", ".join(m["username"] for m in members) or "none"))


def _acls(admin: bool | None, vcs: tuple[str, ...], storages: tuple[str, ...]) -> dict[str, Any]:
    acls: dict[str, Any] = {}
    if admin is not None:
        acls["admin"] = admin
    if vcs:
        acls["virtualClusters"] = list(vcs)
    if storages:
        acls["storageConfigs"] = list(storages)
    return acls


@client_command("create")
@click.argument("name")
@click.option("--description", default="", help="What the group is for.")
@click.option("--external-name", default="", help="Its name in an external directory (e.g. an AAD group).")
@click.option("--admin", is_flag=True, default=False, help="Its members are admins.")
@click.option("--vc", "vcs", multiple=True, metavar="VC", help="A VC its members may use (repeatable).")
@click.option("--storage", "storages", multiple=True, metavar="NAME", help="A storage its members may mount.")
@master_option
def group_create(name: str, description: str, external_name: str, admin: bool, vcs: tuple[str, ...],
                 storages: tuple[str, ...], master: str | None) -> None:
    """Create group NAME (admins only)."""
    body = {"groupname": name, "description": description, "externalName": external_name,
            "extension": {"acls": _acls(admin or None, vcs, storages)}}
    connect(master).api.create_group(body)
    click.echo(f"group {name} created")


@client_command("set")
@click.argument("name")
@click.option("--description", default=None, help="A new description.")
@click.option("--admin/--no-admin", default=None, help="Its members are admins, or no longer.")
@click.option("--vc", "vcs", multiple=True, metavar="VC", help="Replace the VCs it grants (repeatable).")
@click.option("--storage", "storages", multiple=True, metavar="NAME", help="Replace the storages it grants.")
@master_option
def group_set(name: str, description: str | None, admin: bool | None, vcs: tuple[str, ...],
              storages: tuple[str, ...], master: str | None) -> None:
    """Change group NAME (admins only). What is not given stays."""
    api = connect(master).api
    data: dict[str, Any] = {"groupname": name}
    if description is not None:
        data["description"] = description
    changed = _acls(admin, vcs, storages)
    if changed:
        current = api.group_call("GET", name)
        extension = current.get("extension") or {}
        data["extension"] = {"acls": {**(extension.get("acls") or {}), **changed}}
    if len(data) == 1:
        raise click.UsageError("nothing to change: give --description, --admin/--no-admin, --vc or --storage")
    api.update_group(data)
    click.echo(f"group {name} updated")


@client_command("delete")
@click.argument("name")
@master_option
def group_delete(name: str, master: str | None) -> None:
    """Delete group NAME (admins only); its members leave it."""
    connect(master).api.group_call("DELETE", name)
    click.echo(f"group {name} deleted")


for _command in (group_list, group_show, group_create, group_set, group_delete):
    group.add_command(_command)
