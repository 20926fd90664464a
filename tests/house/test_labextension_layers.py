"""The sidebar's folders import one way (docs/architecture.md, "The sidebar"): plugins → views →
models → api, never backwards. models/ hold no DOM and no JupyterLab widget modules, so node's unit
tests can load them and a view is only composition. The check reads the import lines of
labextension/src; it needs no build."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "labextension" / "src"

# Which folders each folder may import from (its own included).
MAY_IMPORT = {
    "api": {"api"},
    "models": {"models", "api"},
    "views": {"views", "models", "api"},
    "plugins": {"plugins", "views", "models", "api"},
}

# Imports that go backwards, each to be taken out (the test fails when one is gone, so the list only
# shrinks). None today: api/request.ts's read clock and answer shapes moved into api/.
KNOWN_BACKWARDS: set[tuple[str, str]] = set()

# The service (api/request.ts: every REST call and stream) is the data sources' to call: views get
# their data from models/ (models/sources.ts hands each area its source) and never import it.
SERVICE = "api/request.ts"
# Views that still import the service, each to be moved onto a source (the test fails when one no
# longer does, so the list only shrinks). None today.
KNOWN_SERVICE_USERS: set[str] = set()

# Packages that mean widgets or the application shell: views and plugins only.
WIDGET_PACKAGES = (
    "@jupyterlab/application",
    "@jupyterlab/apputils",
    "@jupyterlab/ui-components",
    "@jupyterlab/docmanager",
    "@jupyterlab/filebrowser",
    "@lumino/widgets",
)
DOM_USE = re.compile(r"\bdocument\.|\bHTML\w*Element\b|\bElement\b\s*[|>)\],;]")

IMPORT = re.compile(
    r"""(?:^|;|\n)\s*(?:import|export)\b[^'";]*?\bfrom\s*['"]([^'"]+)['"]"""  # import/export … from '…'
    r"""|\bimport\s*\(?\s*['"]([^'"]+)['"]"""  # import '…' and import('…')
)


def _sources() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.ts") if p.name != "index.ts" or p.parent != SRC)


def _imports(path: Path) -> list[str]:
    text = path.read_text()
    return [a or b for a, b in IMPORT.findall(text)]


def _folder(rel: Path) -> str:
    return rel.parts[0]


def test_every_module_is_in_a_folder() -> None:
    loose = [p.name for p in SRC.glob("*.ts") if p.name != "index.ts"]
    assert not loose, f"modules outside api/ models/ views/ plugins/: {loose}"
    folders = {p.name for p in SRC.iterdir() if p.is_dir()}
    assert folders == set(MAY_IMPORT), folders


def test_imports_go_one_way() -> None:
    wrong, seen_known = [], set()
    for path in _sources():
        rel = path.relative_to(SRC)
        for spec in _imports(path):
            if not spec.startswith("."):
                continue
            target = (path.parent / spec).resolve().with_suffix(".ts").relative_to(SRC)
            if _folder(target) in MAY_IMPORT[_folder(rel)]:
                continue
            pair = (rel.as_posix(), target.as_posix())
            if pair in KNOWN_BACKWARDS:
                seen_known.add(pair)
            else:
                wrong.append(f"{pair[0]} imports {pair[1]}")
    assert not wrong, "imports against plugins → views → models → api:\n" + "\n".join(wrong)
    gone = KNOWN_BACKWARDS - seen_known
    assert not gone, f"no longer imported: take them out of KNOWN_BACKWARDS: {sorted(gone)}"


def test_views_do_not_import_the_service() -> None:
    users = set()
    for path in _sources():
        rel = path.relative_to(SRC)
        if _folder(rel) != "views":
            continue
        for spec in _imports(path):
            if (
                spec.startswith(".")
                and (path.parent / spec).resolve().with_suffix(".ts").relative_to(SRC).as_posix() == SERVICE
            ):
                users.add(rel.as_posix())
    wrong = sorted(users - KNOWN_SERVICE_USERS)
    assert not wrong, f"views import the service ({SERVICE}); fetch in a models/ data source instead: {wrong}"
    gone = sorted(KNOWN_SERVICE_USERS - users)
    assert not gone, f"no longer import the service: take them out of KNOWN_SERVICE_USERS: {gone}"


def test_models_and_api_hold_no_dom_or_widgets() -> None:
    wrong = []
    for path in _sources():
        rel = path.relative_to(SRC)
        if _folder(rel) not in ("models", "api") or path.name.endswith(".gen.ts"):
            continue
        for spec in _imports(path):
            if spec.startswith(WIDGET_PACKAGES):
                wrong.append(f"{rel.as_posix()} imports {spec}")
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("//", 1)[0]
            if DOM_USE.search(code):
                wrong.append(f"{rel.as_posix()}:{n}: {line.strip()}")
    assert not wrong, "models/ and api/ are DOM-free:\n" + "\n".join(wrong)


def test_the_check_sees_imports() -> None:
    # The regex must find the multi-line imports the sources use, or the checks above pass on nothing.
    plugin = _imports(SRC / "plugins" / "plugin.ts")
    assert "../views/panel/panel" in plugin and "@jupyterlab/application" in plugin, plugin
    assert "./readclock" in _imports(SRC / "api" / "request.ts")
    assert "../api/request" in _imports(SRC / "models" / "sources.ts")
