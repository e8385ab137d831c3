"""Appendix B: the steps of `hatch run ci:all`, read from hatch.toml, with what each runs and under which settings.

Prints a markdown table: a step added to CI, or a flag changed in an environment, shows up here without anyone
editing the appendix.
"""

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent


def scripts_of(envs: dict[str, Any], env: str) -> dict[str, Any]:
    """An environment's scripts, with those of the environment it copies (`template`) underneath."""
    own = envs[env].get("scripts", {})
    template = envs[env].get("template", env)
    return own if template == env else {**scripts_of(envs, template), **own}


def cell(commands: str | list[str], args: list[str]) -> str:
    """The commands a script runs, with the arguments that ci:all gives it (such as -n 2) in place of {args}."""
    listed = [commands] if isinstance(commands, str) else commands
    given = "".join(f" {a}" for a in args)
    return "<br>".join(f"`{c.replace(' {args}', given).replace('|', '&#124;')}`" for c in listed)


# --8<-- [start:steps]
envs = tomllib.loads((ROOT / "hatch.toml").read_text())["envs"]
print("| step | runs | settings |")
print("| --- | --- | --- |")
for step in envs["ci"]["scripts"]["all"]:
    name, *args = step.removeprefix("hatch run ").split()
    env, script = name.split(":")
    settings = envs[env].get("env-vars", {})
    shown = "<br>".join(f"`{key}={value}`" for key, value in settings.items())
    print(f"| `{name}` | {cell(scripts_of(envs, env)[script], args)} | {shown} |")
# --8<-- [end:steps]
