"""`gpuplat import polyaxon FILE...` and the file side of `gpuplat submit -f polyaxonfile.yaml`.

The conversion is core/polyaxon.py's; here are the files and the printing. `fill`, which a sweep
child's command runs through to fill `{{ param }}` from its params, runs inside the run:
run/polyaxon_fill.py.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..client.suggest import SuggestingParser
from ..core.config import PresetConfig, validation_messages
from ..core.errors import GpuPlatError, InvalidInput
from ..core.polyaxon import Note, convert_preset, report_text
from ..core.polyaxon_op import convert_operation
from ..run.polyaxon_fill import fill

SUFFIXES = (".yaml", ".yml")


def load(path: str | Path) -> Any:
    p = Path(path)
    try:
        return yaml.safe_load(p.read_text())
    except OSError as exc:
        raise InvalidInput(f"{p}: cannot read it ({exc.strerror})", "give an existing Polyaxon file") from None
    except yaml.YAMLError as exc:
        raise InvalidInput(f"{p}: not valid YAML: {exc}", "fix the file; nothing was converted") from None


def preset_name(path: str | Path) -> str:
    """A preset's name from its file name: `gpu_experiments.yaml` -> `gpu-experiments`."""
    stem = Path(path).stem.lower().removeprefix("preset-")
    return re.sub(r"[^a-z0-9._-]+", "-", stem.replace("_", "-")).strip("-._")[:63] or "preset"


def import_presets(paths: Sequence[str]) -> tuple[list[dict[str, Any]], dict[str, list[Note]]]:
    """Every file as a validated PresetConfig dict; the report per preset name."""
    presets, reports = [], {}
    for path in paths:
        name = preset_name(path)
        try:
            raw, notes = convert_preset(name, load(path))
        except (TypeError, AttributeError, ValueError, KeyError) as exc:
            raise _malformed(path, exc) from None
        try:
            preset = PresetConfig.model_validate(raw)
        except ValidationError as exc:
            raise InvalidInput(f"{path}: " + "; ".join(validation_messages(exc)), "") from None
        presets.append(preset.model_dump(mode="json", exclude_defaults=True))
        reports[name] = notes
    return presets, reports


def submit_body(path: str, project: str) -> tuple[dict[str, Any], list[Note]]:
    """The RunRequest body of a polyaxonfile (its pathRef read relative to it)."""
    data = load(path)
    component = None
    if isinstance(data, dict) and data.get("pathRef"):
        ref = Path(path).parent / str(data["pathRef"])
        if not ref.is_file():
            raise InvalidInput(f"{path}: pathRef {data['pathRef']} not found ({ref})", "give the component's file")
        component = load(ref)
    try:
        return convert_operation(project, data, component)
    except (TypeError, AttributeError, ValueError, KeyError) as exc:
        raise _malformed(path, exc) from None


def _malformed(path: str, exc: Exception) -> InvalidInput:
    if isinstance(exc, InvalidInput):
        return exc
    return InvalidInput(f"{path}: a section has the wrong shape ({type(exc).__name__}: {exc})", "see docs/polyaxon.md")


def split_follow(follow: bool, command: list[str]) -> tuple[str | None, bool, list[str]]:
    """`submit -f`: the rule of docs/polyaxon.md. Returns (polyaxonfile, follow, command).

    `-f` is a flag (follow) and the command starts at the first word that is not an option;
    with `-f`, a first word ending in .yaml/.yml is a polyaxonfile instead (it must exist).
    `-f -- x.yaml` runs x.yaml as a command and follows it.
    """
    if not (follow and command and command[0].endswith(SUFFIXES)):
        return None, follow, command
    if Path(command[0]).is_file():
        return command[0], False, command[1:]
    raise InvalidInput(
        f"-f {command[0]}: no such polyaxonfile",
        "give an existing .yaml/.yml file, or put -- before a command: gpuplat submit -f -- CMD",
    )


def _parser() -> argparse.ArgumentParser:
    p = SuggestingParser(
        prog="gpuplat import polyaxon",
        description="Convert Polyaxon preset files (patchStrategy, runPatch, queue, termination) into "
        "presets of the platform config, with a report of what each field became.",
    )
    p.add_argument("--url", help="accepted for symmetry: importing reads files only")
    p.add_argument("--token", help="accepted for symmetry: importing reads files only")
    p.add_argument("--json", action="store_true", help="print {presets, report} as JSON")
    p.add_argument("source", choices=["polyaxon"], help="what to import from")
    p.add_argument("files", nargs="+", metavar="FILE", help="Polyaxon preset files (the name comes from the file's)")
    p.add_argument("--out", help="write the presets here (a platform-config fragment: presets: [...])")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["fill"]:
        return fill(argv[1:])  # `gpuplat import fill -- ...` has always run what a sweep child runs
    args = _parser().parse_args(argv)
    try:
        presets, reports = import_presets(args.files)
    except GpuPlatError as exc:
        print(f"gpuplat: {exc.message}" + (f"\n  hint: {exc.hint}" if exc.hint else ""), file=sys.stderr)
        return 1
    text = yaml.safe_dump({"presets": presets}, sort_keys=False)
    if args.out:
        Path(args.out).write_text(text)
    if args.json:
        out = {"presets": presets, "report": {k: [n.to_dict() for n in v] for k, v in reports.items()}}
        print(json.dumps(out, indent=2))
        return 0
    if not args.out:
        print(text)
    for name, notes in reports.items():
        print(f"# preset {name}\n{report_text(notes)}\n")
    if args.out:
        print(f"wrote {len(presets)} preset(s) to {args.out}: add them to the platform config's presets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
