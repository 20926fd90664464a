"""IPython magics: `%load_ext jupyter_gpuplat`.

    %%gpu_submit --preset single-gpu --param lr=0.1
    from jupyter_gpuplat import tracking
    ...

    %gpu_submit train.py --epochs 3        # a script (args after the path)
    %gpu_submit analysis.ipynb              # a notebook, executed headless
    %gpu_runs   %gpu_queues   %gpu_explain RUN

    %%gpu_sweep --grid lr=1e-3,3e-4 --grid batch=32,64 --concurrency 2
    %%gpu_sweep --random lr=loguniform:1e-5:1e-2 --num-runs 20 --seed 1 --concurrency 4
    lr = tracking.params()["lr"]           # the cell, once per params

    %gpu_session start [--preset notebook] [--project team-a] [--notebook path.ipynb]
    %gpu_session status        %gpu_session keep [ID]        %gpu_session stop [ID]

Submitting returns at once with a status line that follows the run to its final state
(widgets/statusline.py) and a live RunMonitor; only `--wait` blocks the kernel. A cell's run
is named after its notebook and cell plus its params (`train.ipynb · cell 3 · lr=0.03`; see
widgets/naming.py for what shows when), unless `--name` names it. A refusal shows the
service's message and what is allowed, not a traceback; an unknown option says which one
was meant ("did you mean --param?").
"""

from __future__ import annotations

import argparse
import html
import os
import posixpath
import shlex
from collections.abc import Mapping
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import HTML, display

from ..client.explaining import explanation_lines, waiting_summary
from ..client.rest import Client, GpuPlatAPIError, parse_params
from ..client.runnames import cell_label, run_name
from ..client.suggest import did_you_mean
from ..client.sweeping import children_text, concurrency_text, make_matrix
from ..core.errors import GpuPlatError
from .widgets._html import notebook_link
from .widgets.statusline import StatusLine, status_text

_VALUE_OPTIONS = {"-p", "--project", "--preset", "-q", "--queue", "--gpus", "-n", "--name", "--param"}


def unknown_option(parser: argparse.ArgumentParser, words: list[str]) -> str | None:
    """The first word that looks like an option this magic does not have (values of options skipped)."""
    actions = parser._option_string_actions  # argparse's map of every spelling of every option
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        if not w.startswith("-") or w == "-" or w[1:2].isdigit() or w[1:2] == ".":
            continue  # a positional word or a negative number
        flag, eq, _ = w.partition("=")
        action = actions.get(flag)
        if action is None:
            return flag
        skip = not eq and action.nargs != 0
    return None


def unknown_option_error(magic: str, parser: argparse.ArgumentParser, flag: str) -> UsageError:
    """`unknown option --parm: did you mean --param? (options of %gpu_submit: …)`."""
    options = sorted({max(a.option_strings, key=len) for a in parser._actions if a.option_strings} - {"--help"})
    guess = did_you_mean(flag, [o for a in parser._actions for o in a.option_strings])
    message = f"unknown option {flag}" + (f": did you mean {guess}?" if guess else "")
    return UsageError(f"{message} (options of %{magic}: {', '.join(options)})")


def refusal_html(err: GpuPlatError, what: str = "gpu_submit") -> HTML:
    hint = f"<div style='opacity:.85'>{html.escape(err.hint)}</div>" if err.hint else ""
    return HTML(
        "<div class='gpuplat-refusal' style='border-left:4px solid var(--jp-error-color1,#d32f2f);"
        "padding:4px 8px;color:var(--jp-ui-font-color1)'>"
        f"<b>{html.escape(what)} refused</b> ({html.escape(err.code)}): {html.escape(err.message)}{hint}</div>"
    )


@magics_class
class GpuMagics(Magics):
    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client()
        return self._client

    def default_project(self) -> str:
        return self.client.default_project()

    @magic_arguments()
    @argument("--project", "-p", help="project to submit to (default: GPUPLAT_PROJECT or your first project)")
    @argument("--preset", action="append", help="preset to apply; repeat for several, in order")
    @argument("--queue", "-q", help="queue (default: from presets and the project)")
    @argument("--gpus", type=int, help="number of GPUs")
    @argument("--name", "-n", help="run name (default for a cell: its notebook and cell, then its params)")
    @argument("--param", action="append", help="key=value passed to the run (tracking.params())")
    @argument("--wait", action="store_true", help="block until the run ends")
    @line_cell_magic
    def gpu_submit(self, line: str, cell: str | None = None) -> Any:
        """Submit a cell, a script or a notebook to a GPU queue."""
        try:
            opts, target = self._parse(line)
        except UsageError as err:
            print(f"{err}\nusage: %gpu_submit [options] path/to/script.py [args]  or  %%gpu_submit [options]")
            return None
        if cell is None and not target:
            print("usage: %gpu_submit path/to/script.py [args]  or  %%gpu_submit [options] (cell magic)")
            return None
        try:
            fields: dict[str, Any] = {
                "presets": opts.preset or [],
                "queue": opts.queue,
                "gpus": opts.gpus,
                "name": opts.name,
                "params": parse_params(opts.param) or None,
            }
            # The run starts in the kernel's directory (the notebook's), so relative paths work as in the notebook.
            fields["working_dir"] = os.getcwd()
            if cell is not None:
                fields["code"] = cell
                fields["name"] = fields["name"] or run_name(self._cell_label(), fields["params"])
            else:
                fields["script"] = os.path.abspath(target[0])
                fields["args"] = target[1:]
            run = self.client.submit(opts.project or self.default_project(), **fields)
        except GpuPlatAPIError as err:
            display(refusal_html(err))
            return None
        except ValueError as err:  # a malformed option, caught before any request
            display(refusal_html(GpuPlatAPIError(str(err), code="InvalidInput")))
            return None
        self.ns["gpu_last_run"] = run
        for note in run.get("notes") or ():  # the service's cautions, as the submit dialog shows them
            print(note)
        if opts.wait:
            run = self.client.wait(run["id"])
            self.ns["gpu_last_run"] = run
        self._show_status(run)
        display(self._monitor(run))
        return None

    @magic_arguments()
    @argument("--grid", action="append", help="grid param: lr=1e-3,3e-4 or n=range:1:10:2 (repeat per param)")
    @argument("--random", action="append", help="random param: lr=loguniform:1e-5:1e-2 (repeat per param)")
    @argument("--mapping", help="a JSON file: a list of param objects, one child each")
    @argument("--num-runs", type=int, help="random: how many children (grid: at most this many)")
    @argument("--seed", type=int, help="random: the seed of the draws")
    @argument("--concurrency", type=int, help="at most this many children dispatched at once (default 1)")
    @argument("--max-failures", type=int, help="fail the sweep when more children than this fail")
    @argument("--objective", help="the metric the best child is chosen on: val_loss (minimized) or acc:maximize")
    @argument("--project", "-p", help="project (default: GPUPLAT_PROJECT or your first project)")
    @argument("--preset", action="append", help="preset to apply; repeat for several, in order")
    @argument("--queue", "-q", help="queue (default: from presets and the project)")
    @argument("--gpus", type=int, help="GPUs of each child")
    @argument("--name", "-n", help="the sweep's name")
    @cell_magic
    def gpu_sweep(self, line: str, cell: str) -> None:
        """Submit the cell as a sweep: one child run per params, at most `--concurrency` at once."""
        try:
            self._check_options(self.gpu_sweep, "gpu_sweep", shlex.split(line))
            opts = parse_argstring(self.gpu_sweep, line)
        except UsageError as err:
            print(f"{err}\nusage: %%gpu_sweep --grid lr=1e-3,3e-4 | --random lr=loguniform:1e-5:1e-2 --num-runs N")
            return
        try:
            matrix = make_matrix(
                grid=opts.grid or (),
                random=opts.random or (),
                mapping=opts.mapping,
                num_runs=opts.num_runs,
                seed=opts.seed,
                concurrency=opts.concurrency,
                max_failures=opts.max_failures,
                objective=opts.objective,
            )
            sweep = self.client.submit(
                opts.project or self.default_project(),
                code=cell,
                name=opts.name or "sweep",
                presets=opts.preset or [],
                queue=opts.queue,
                gpus=opts.gpus,
                working_dir=os.getcwd(),  # as %%gpu_submit: relative paths work as in the notebook
                matrix=matrix,
            )
        except GpuPlatError as err:  # the service's refusal, or a malformed option caught before any request
            display(refusal_html(err, "gpu_sweep"))
            return
        except ValueError as err:  # the request against the service's schema, checked before it is sent
            display(refusal_html(GpuPlatAPIError(str(err), code="InvalidInput"), "gpu_sweep"))
            return
        from .widgets.sweep import SweepView

        self.ns["gpu_last_sweep"] = sweep
        status = StatusLine(sweep, self.client, lambda text: handle.update(_summary_html(text)), text=_sweep_line)
        handle = display(_summary_html(status.text), display_id=True)
        status.start()  # kept current until the sweep ends, as a run's line
        display(SweepView(sweep, self.client))

    def _show_status(self, run: dict[str, Any]) -> StatusLine:
        """One line any frontend can show (plain text too): the status and, if waiting, why; then kept
        current in place (a display-handle update) until the run is final."""
        explain = self._explain_if_waiting(run)
        status = StatusLine(run, self.client, lambda text: handle.update(_summary_html(text)), explain)
        handle = display(_summary_html(status.text), display_id=True)
        self.ns["gpu_last_status"] = status
        return status.start()

    def _explain_if_waiting(self, run: Mapping[str, Any]) -> dict[str, Any] | None:
        if run["status"] in ("created", "queued", "dispatched", "starting"):
            try:
                return self.client.explain(run["id"])
            except GpuPlatAPIError:
                pass
        return None

    def _cell_label(self) -> str:
        """`train.ipynb · cell 3` (see widgets/naming.py for when it is `In [n]`)."""
        shell: Any = self.shell
        kernel = getattr(shell, "kernel", None)
        parent = kernel.get_parent() if kernel is not None and hasattr(kernel, "get_parent") else None
        cell_id = ((parent or {}).get("metadata") or {}).get("cellId")
        notebook = self.ns.get("__session__")
        count = getattr(shell, "execution_count", None)
        return cell_label(notebook if isinstance(notebook, str) and notebook else None, cell_id, count)

    def _check_options(self, func: Any, magic: str, words: list[str]) -> None:
        flag = unknown_option(func.parser, words)
        if flag is not None:
            raise unknown_option_error(magic, func.parser, flag)

    def _parse(self, line: str) -> tuple[Any, list[str]]:
        # Options come first; from the script path on, the words belong to the script.
        words = shlex.split(line)
        i = 0
        while i < len(words):
            if words[i] in _VALUE_OPTIONS:
                i += 2
            elif words[i].startswith("-"):
                i += 1
            else:
                break
        self._check_options(self.gpu_submit, "gpu_submit", words[:i])
        opts = parse_argstring(self.gpu_submit, " ".join(shlex.quote(w) for w in words[:i]))
        return opts, words[i:]

    @property
    def ns(self) -> dict[str, Any]:
        assert self.shell is not None
        return self.shell.user_ns

    def _monitor(self, run: dict[str, Any]) -> Any:
        from .widgets import RunMonitor

        return RunMonitor(run, client=self.client)

    @line_magic
    def gpu_runs(self, line: str) -> None:
        """Recent runs you can see (optionally: a project name)."""
        runs = self.client.list(project=line.strip() or None, limit=20)
        rows = "".join(
            f"<tr><td>{html.escape(r['id'])}</td><td>{html.escape(r['name'] or '')}</td><td>{r['project']}</td>"
            f"<td>{r['queue']}</td><td>{r['status']}</td><td>{r['resources']['gpu']}</td>"
            f"<td>{html.escape(r['message'])}</td></tr>"
            for r in runs
        )
        display(_table(["id", "name", "project", "queue", "status", "GPUs", "message"], rows))

    @line_magic
    def gpu_queues(self, line: str) -> None:
        """Queues with live usage and what the head of each waits for."""
        rows = ""
        for q in self.client.queues():
            conc = f"{q['usage']['runs']}/{q['concurrency'] if q['concurrency'] is not None else '∞'}"
            gpus = f"{q['usage']['gpu']}/{q['quota']['gpu'] if q['quota']['gpu'] is not None else '∞'}"
            wait = html.escape((q["head_wait"] or {}).get("message", ""))
            rows += (
                f"<tr><td>{q['name']}</td><td>{q['priority']}</td><td>{conc}</td><td>{gpus}</td>"
                f"<td>{q['pending']}</td><td>{'paused' if q['paused'] else ''}</td><td>{wait}</td></tr>"
            )
        display(_table(["queue", "priority", "runs", "GPUs", "pending", "", "head waits for"], rows))

    @line_magic
    def gpu_explain(self, line: str) -> None:
        """Why a run is where it is: `%gpu_explain RUN_ID`."""
        run_id = line.strip() or (self.ns.get("gpu_last_run") or {}).get("id")
        if not run_id:
            print("usage: %gpu_explain RUN_ID")
            return
        try:
            e = self.client.explain(run_id)
        except GpuPlatAPIError as err:
            display(refusal_html(err))
            return
        head = f"<b>{html.escape(run_id)}</b>: <b>{html.escape(e['layer'])}</b> — {html.escape(e['reason'])}"
        rest = [html.escape(f"{label}: {text}") for label, text in explanation_lines(e) if label != "layer"]
        display(HTML("<div class='gpuplat-explain'>" + "<br>".join([head, *rest]) + "</div>"))

    # ---- GPU sessions ------------------------------------------------------------------------
    @magic_arguments()
    @argument("action", choices=["start", "status", "keep", "stop"], help="what to do")
    @argument("run_id", nargs="?", help="keep/stop: the session (default: the one this kernel started last)")
    @argument("--project", "-p", help="start: project (default: GPUPLAT_PROJECT or your first project)")
    @argument("--preset", help="start: session preset (default: the project's first of kind session)")
    @argument("--notebook", help="start: notebook beside this one (created when missing; default: a new one)")
    @line_magic
    def gpu_session(self, line: str) -> None:
        """A GPU session: a notebook kernel on a GPU lease that waits in the interactive queue."""
        try:
            self._check_options(self.gpu_session, "gpu_session", shlex.split(line))
            opts = parse_argstring(self.gpu_session, line)
        except UsageError as err:
            print(
                f"{err}\nusage: %gpu_session start|status|keep|stop [ID] [--preset P] [--project X] [--notebook path]"
            )
            return
        try:
            if opts.action == "start":
                self._session_start(opts)
            elif opts.action == "status":
                self._session_status()
            else:
                run_id = opts.run_id or self._last_session()
                run = self.client.stop(run_id) if opts.action == "stop" else self.client.keepalive(run_id)
                self.ns["gpu_last_session"] = run
                text = f"{run_id} {run['status']}: {run['message']}"
                display(HTML(f"<div class='gpuplat-session'>{html.escape(text)}</div>"))
        except GpuPlatAPIError as err:
            display(refusal_html(err, "gpu_session"))

    def _session_start(self, opts: Any) -> None:
        from .widgets import SessionView

        notebook = opts.notebook
        if notebook is not None and not os.path.isabs(notebook):
            notebook = posixpath.join(self.client.here(), notebook)  # beside this notebook, as typed here
        run = self.client.start_session(opts.project, opts.preset, notebook)
        self.ns["gpu_last_session"] = run
        nb = (run.get("session") or {}).get("notebook")
        link = f" — {notebook_link(nb, self.client.here())}" if nb else ""

        def line(text: str) -> HTML:
            return HTML(f"<div class='gpuplat-session'>{html.escape(text)}{link}</div>")

        explain = self._explain_if_waiting(run)
        status = StatusLine(run, self.client, lambda text: handle.update(line(text)), explain, text=_session_text)
        handle = display(line(status.text), display_id=True)
        self.ns["gpu_last_status"] = status
        status.start()  # kept current as the lease waits, runs and ends, as a run's line
        display(SessionView(run, self.client))

    def _session_status(self) -> None:
        sessions = self.client.sessions()
        if not sessions:
            display(HTML("<div class='gpuplat-session'>no GPU session of yours is queued or running</div>"))
            return
        here = self.client.here()
        rows = ""
        for r in sessions:
            sess = r.get("session") or {}
            nb = sess.get("notebook")
            link = notebook_link(nb, here, nb) if nb else ""
            rows += (
                f"<tr><td>{html.escape(r['id'])}</td><td>{html.escape(r['project'])}</td>"
                f"<td>{html.escape(','.join(r.get('presets') or []))}</td><td>{r['queue']}</td>"
                f"<td>{r['status']}</td><td>{html.escape(str(sess.get('kernel', '')))}</td>"
                f"<td>{','.join(map(str, r['devices']))}</td><td>{link}</td>"
                f"<td>{html.escape(self._session_line(r))}</td></tr>"
            )
        display(_table(["id", "project", "preset", "queue", "status", "kernel", "GPUs", "notebook", ""], rows))

    def _session_line(self, run: dict[str, Any]) -> str:
        line = f"{run['id']} {run['status']} in queue {run['queue']}"
        if run["devices"]:
            return f"{line} on GPU {','.join(map(str, run['devices']))}"
        if run["status"] in ("queued", "dispatched", "starting"):
            try:
                return (
                    f"{line} — {waiting_summary(self.client.explain(run['id']))}; its notebook connects when admitted"
                )
            except GpuPlatAPIError:
                pass
        return line

    def _last_session(self) -> str:
        """The session this kernel started last, else your only one."""
        last = self.ns.get("gpu_last_session")
        if last:
            return str(last["id"])
        sessions = self.client.sessions()
        if len(sessions) == 1:
            return str(sessions[0]["id"])
        ids = ", ".join(r["id"] for r in sessions) or "none"
        raise GpuPlatAPIError(
            "which session?", f"give its id: %gpu_session stop ID (yours: {ids})", code="InvalidInput"
        )


def _sweep_line(sweep: Mapping[str, Any], _explain: Any, _clocks: Any) -> str:
    """`r-1 running — sweep of 3 children: 2 running, 1 queued · concurrency 2`."""
    return f"{sweep['id']} {sweep['status']} — sweep of {children_text(sweep)} · {concurrency_text(sweep)}"


def _session_text(run: Mapping[str, Any], explain: Mapping[str, Any] | None, clocks: Mapping[str, float | None]) -> str:
    """A lease's line: a run's (status_text), and while it waits, that its notebook connects when admitted."""
    text = status_text(run, explain, clocks)
    if run["status"] not in ("created", "queued", "dispatched", "starting"):
        return text
    head, sep, clock = text.rpartition(" · waiting ")
    return f"{head}; its notebook connects when admitted{sep}{clock}" if sep else text


def _summary_html(text: str) -> HTML:
    return HTML(f"<div class='gpuplat-summary'>{html.escape(text)}</div>")


def _table(headers: list[str], rows: str) -> HTML:
    head = "".join(f"<th style='text-align:left'>{h}</th>" for h in headers)
    return HTML(f"<table class='gpuplat-table'><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
