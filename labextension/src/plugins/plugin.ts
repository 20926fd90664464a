import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, Notification, WidgetTracker } from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStateDB } from '@jupyterlab/statedb';
import { LabIcon } from '@jupyterlab/ui-components';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';

import { CompareTab } from '../views/compare/comparetab';
import { RunOutputsDrive } from '../models/drive';
import { addMainAreaStyle } from '../views/mainstyle';
import { OutputsOpener, readOnlyNotebooks } from '../views/outputs/outputs';
import { GpuPlatPanel, IPanelState } from '../views/panel/panel';
import { GpuPlatService } from '../api/request';
import type { IRunActions } from '../views/runs/rundetail';
import { RunTab } from '../views/runs/runtab';
import { INotebookLike, SessionsController } from '../views/sessions/sessions';
import { SubmitForm } from '../views/submit/submit';
import { SubmitDialog } from '../views/submit/submitdialog';
import type { IRunRequest } from '../api/types';
import { GpuPlatSources } from '../models/sources';
import { DEFAULT_NOTIFY, INotifySettings, ISubmitState, stateFromRun } from '../models/viewmodel';

export { requestAPI, GpuPlatAPIError, GpuPlatService, API_NAMESPACE } from '../api/request';
export { GpuPlatPanel } from '../views/panel/panel';

/** The id of the sidebar widget (also its restorer key). */
export const SIDEBAR_ID = 'jupyter-gpuplat-sidebar';
const PLUGIN_ID = 'jupyter-gpuplat:plugin';
const STATE_KEY = 'jupyter-gpuplat:panel';
/** The submit dialog's memory (IStateDB, saved with the workspace): last project, presets per project. */
const SUBMIT_STATE_KEY = 'jupyter-gpuplat:submit';

export const CommandIDs = {
  submit: 'gpuplat:submit',
  open: 'gpuplat:open',
  openRun: 'gpuplat:open-run',
  compare: 'gpuplat:compare',
  openOutput: 'gpuplat:open-output',
  openRunFolder: 'gpuplat:open-run-folder',
  resubmit: 'gpuplat:resubmit',
  startSession: 'gpuplat:start-session'
};

const SUBMITTABLE = /\.(py|ipynb)$/;

interface ISubmitMemory {
  project?: string;
  presets?: Record<string, string[]>;
}

interface IOpenSubmit {
  path?: string;
  preset?: string;
  /** "Submit again…": the form prefilled from a run, and that run's request. */
  initial?: ISubmitState;
  base?: IRunRequest | null;
  title?: string;
}

export const gpuIcon = new LabIcon({
  name: 'jupyter-gpuplat:gpu',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">' +
    '<g class="jp-icon3" fill="#616161">' +
    '<path d="M7 5h10a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H7a2 2 0 0 1-2-2V7a2 2 0 0 1 2-2zm0 2v10h10V7H7z"/>' +
    '<path d="M9 9h6v6H9z"/>' +
    '<path d="M8 1h2v3H8zM14 1h2v3h-2zM8 20h2v3H8zM14 20h2v3h-2zM1 8h3v2H1zM1 14h3v2H1zM20 8h3v2h-3zM20 14h3v2h-3z"/>' +
    '</g></svg>'
});

/** Run ids from a command's args: `{ids: [...]}` or `{ids: "a,b"}`. */
function idsArg(v: unknown): string[] {
  const items = Array.isArray(v) ? v.map(String) : typeof v === 'string' ? v.split(',') : [];
  return [...new Set(items.map(s => s.trim()).filter(Boolean))];
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description:
    'GPU platform: the runs sidebar, run and Compare tabs, run outputs as a read-only drive, submit and submit again.',
  autoStart: true,
  optional: [ILayoutRestorer, ICommandPalette, IDefaultFileBrowser, ISettingRegistry, IStateDB, IDocumentManager],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    browser: IDefaultFileBrowser | null,
    settingRegistry: ISettingRegistry | null,
    state: IStateDB | null,
    docManager: IDocumentManager | null
  ) => {
    const service = new GpuPlatService();
    // views get their data sources from this; they never call the service themselves
    const sources = new GpuPlatSources(service);
    addMainAreaStyle();

    /** The file selected in the file browser, if it is a .py or .ipynb file. */
    const selectedFile = (): string => {
      const first = browser?.selectedItems().next();
      if (!first || first.done) {
        return '';
      }
      const model = first.value;
      return model.type !== 'directory' && SUBMITTABLE.test(model.path) ? model.path : '';
    };

    const submitMemory = async (): Promise<ISubmitMemory> =>
      ((await state?.fetch(SUBMIT_STATE_KEY).catch(() => undefined)) ?? {}) as ISubmitMemory;

    const openSubmit = async (o: IOpenSubmit) => {
      await panel.start();
      const memory = await submitMemory();
      const usable = panel.projects.filter(p => p.may_submit).map(p => p.name);
      const project = memory.project && usable.includes(memory.project) ? memory.project : panel.currentProject;
      const form = new SubmitForm({
        source: sources.submit(),
        projects: panel.projects,
        project,
        script: o.path ?? '',
        presets: o.preset ? [o.preset] : memory.presets?.[project] ?? [],
        initial: o.initial,
        base: o.base
      });
      const result = await new SubmitDialog(form, o.title).launch();
      const run = result.button.accept ? result.value : null;
      if (run) {
        const s = form.state;
        const remembered: ISubmitMemory = { project: s.project, presets: { ...memory.presets, [s.project]: [...s.presets] } };
        void state?.save(SUBMIT_STATE_KEY, remembered as unknown as ReadonlyPartialJSONObject);
        app.shell.activateById(SIDEBAR_ID);
        await panel.openRun(run.id, false);
      }
    };

    /** A new notebook in the file browser's folder on the preset's session kernel; its start leases the GPU. */
    const startSession = async (preset: string, project: string) => {
      const spec = await sessions.specFor(preset, project);
      const cwd = browser?.model.path ?? '';
      // Not awaited: the command resolves once the kernel started, which waits for the lease.
      app.commands
        .execute('notebook:create-new', { cwd, kernelName: spec.name })
        .catch(error => Notification.error(`Start GPU session: ${(error as Error).message}`, { autoClose: false }));
    };

    const panel = new GpuPlatPanel({
      sources,
      submit: preset => void openSubmit({ path: selectedFile(), preset }),
      startSession,
      commands: app.commands // the sidebar's buttons execute the main-area commands below
    });
    const sessions = new SessionsController({
      source: sources.sessions(),
      kernelspecs: app.serviceManager.kernelspecs,
      // "Why?" from a notebook's session bar: the lease in the sidebar, the notebook stays in front.
      openRun: id => {
        app.shell.activateById(SIDEBAR_ID);
        void panel.openRun(id, false);
      },
      clockOffset: () => panel.clockOffset
    });
    panel.eventReceived.connect((_, ev) => sessions.onEvent(ev));
    panel.etaReceived.connect((_, ev) => sessions.onEta(ev));
    panel.streamReady.connect(() => sessions.onReady());
    panel.notifier.ignore = id => sessions.owns(id);
    // Also when it failed: a notebook reopened on a session kernel waits for the user to decide.
    void panel.start().then(
      () => (sessions.user = panel.whoami?.user ?? ''),
      () => (sessions.user = '')
    );
    app.docRegistry.addWidgetExtension('Notebook', {
      createNew: (widget, context) => sessions.createNew(widget as unknown as INotebookLike, context)
    });
    panel.id = SIDEBAR_ID;
    panel.title.icon = gpuIcon;
    panel.title.caption = 'GPU platform: runs, queues, presets and insights';
    app.shell.add(panel, 'left', { rank: 900 });
    restorer?.add(panel, SIDEBAR_ID);

    // Run outputs as a read-only drive: JupyterLab's own viewers open them, a file browser lists them.
    app.serviceManager.contents.addDrive(new RunOutputsDrive(service));
    app.docRegistry.addWidgetExtension('Notebook', readOnlyNotebooks());
    const outputs = new OutputsOpener({ app, docManager, icon: gpuIcon });

    // One dock tab per run and per comparison; reopening activates it; the layout restores them.
    const runTabs = new WidgetTracker<RunTab>({ namespace: 'gpuplat-run' });
    const compareTabs = new WidgetTracker<CompareTab>({ namespace: 'gpuplat-compare' });
    const runActions: IRunActions = {
      openFolder: id => void app.commands.execute(CommandIDs.openRunFolder, { id }),
      resubmit: id => void app.commands.execute(CommandIDs.resubmit, { id }),
      openOutput: (id, path) => void app.commands.execute(CommandIDs.openOutput, { id, path })
    };
    const openRunTab = async (id: string, activate = true): Promise<RunTab> => {
      const open = runTabs.find(w => w.runId === id);
      if (open) {
        if (activate) {
          app.shell.activateById(open.id);
        }
        return open;
      }
      const tab = new RunTab({
        source: sources.runDetail(id),
        events: panel.eventReceived,
        etas: panel.etaReceived,
        clockOffset: () => panel.clockOffset,
        onOpen: child => void openRunTab(child),
        actions: runActions
      });
      tab.title.icon = gpuIcon;
      app.shell.add(tab, 'main', { activate });
      await runTabs.add(tab);
      return tab;
    };
    const openCompare = async (ids: string[]): Promise<CompareTab | undefined> => {
      if (ids.length < 2) {
        Notification.warning(`Compare needs two or more runs (got ${ids.length}): select several runs in the list.`);
        return undefined;
      }
      const key = ids.join(',');
      const open = compareTabs.find(w => w.ids.join(',') === key);
      if (open) {
        app.shell.activateById(open.id);
        return open;
      }
      const tab = new CompareTab({ source: sources.compare(ids), ids, events: panel.eventReceived, onOpen: id => void openRunTab(id) });
      tab.title.icon = gpuIcon;
      app.shell.add(tab, 'main');
      await compareTabs.add(tab);
      return tab;
    };
    if (restorer) {
      void restorer.restore(runTabs, {
        command: CommandIDs.openRun,
        args: w => ({ id: w.runId, sidebar: false }),
        name: w => w.runId
      });
      void restorer.restore(compareTabs, {
        command: CommandIDs.compare,
        args: w => ({ ids: w.ids }),
        name: w => w.ids.join(',')
      });
    }

    app.commands.addCommand(CommandIDs.submit, {
      label: 'Submit to GPU queue…',
      caption: 'Run a .py or .ipynb file on the GPU platform: pick presets and a queue, preview, submit',
      icon: gpuIcon,
      execute: args => openSubmit({ path: (args.path as string) || selectedFile(), preset: args.preset as string | undefined })
    });
    app.commands.addCommand(CommandIDs.resubmit, {
      label: 'Submit again…',
      caption: 'The submit dialog prefilled from a run (presets, overrides, params, command) to edit and send (args: id)',
      icon: gpuIcon,
      execute: async args => {
        const id = String(args.id ?? '');
        try {
          const run = await service.getRun(id);
          await openSubmit({
            initial: stateFromRun(run),
            base: run.request as IRunRequest | null,
            title: `Submit again: ${run.name || run.id}`
          });
        } catch (error) {
          Notification.error(`Submit again ${id}: ${(error as Error).message}`, { autoClose: 8000 });
        }
      }
    });
    app.commands.addCommand(CommandIDs.startSession, {
      label: 'Start GPU session',
      caption: "A new notebook in the file browser's folder on a GPU session kernel (args: preset, project)",
      icon: gpuIcon,
      execute: args => startSession(String(args.preset), String(args.project ?? panel.currentProject))
    });
    app.commands.addCommand(CommandIDs.open, {
      label: 'Show GPU platform sidebar',
      execute: () => app.shell.activateById(SIDEBAR_ID)
    });
    app.commands.addCommand(CommandIDs.openRun, {
      label: 'Open GPU run in a tab',
      caption: 'The run in a main-area tab: logs, metric charts, timeline, resolved config (args: id)',
      icon: gpuIcon,
      execute: async args => {
        const id = String(args.id);
        await openRunTab(id, args.activate !== false);
        // The sidebar keeps the compact summary of the same run.
        if (args.sidebar !== false) {
          void panel.openRun(id, false);
        }
      }
    });
    app.commands.addCommand(CommandIDs.compare, {
      label: 'Compare GPU runs',
      caption: 'Runs side by side in a tab: params, config differences, metrics against a baseline (args: ids)',
      icon: gpuIcon,
      execute: async args => void (await openCompare(idsArg(args.ids)))
    });
    app.commands.addCommand(CommandIDs.openOutput, {
      label: 'Open run output',
      caption: "One of a run's output files in a tab, read-only (args: id, path)",
      execute: async args => void (await outputs.openOutput(String(args.id), String(args.path ?? '')))
    });
    app.commands.addCommand(CommandIDs.openRunFolder, {
      label: 'Open run folder',
      caption: "The run's files in a file browser (read-only; args: id)",
      icon: gpuIcon,
      execute: async args => void (await outputs.openFolder(String(args.id)))
    });
    for (const fileType of ['python', 'notebook']) {
      app.contextMenu.addItem({
        command: CommandIDs.submit,
        selector: `.jp-DirListing-item[data-file-type="${fileType}"]`,
        rank: 3
      });
    }
    if (palette) {
      palette.addItem({ command: CommandIDs.submit, category: 'GPU platform' });
      palette.addItem({ command: CommandIDs.open, category: 'GPU platform' });
    }

    if (settingRegistry) {
      void settingRegistry.load(PLUGIN_ID).then(settings => {
        const apply = () => {
          panel.defaultProject = (settings.get('defaultProject').composite as string) ?? '';
          const n = (settings.get('notifications').composite ?? {}) as Partial<INotifySettings>;
          panel.notifier.settings = { ...DEFAULT_NOTIFY, ...n };
        };
        apply();
        settings.changed.connect(apply);
      });
    }

    if (state) {
      void app.restored
        .then(() => state.fetch(STATE_KEY))
        .then(saved => {
          const s = saved as unknown as IPanelState | undefined;
          if (s?.tab) {
            panel.showTab(s.tab);
          }
          if (s?.runId) {
            void panel.openRun(s.runId, false);
          }
          panel.stateChanged.connect((_, st) => {
            void state.save(STATE_KEY, st as unknown as ReadonlyPartialJSONObject);
          });
        });
    }
    console.log('JupyterLab extension jupyter-gpuplat is activated!');
  }
};

export default plugin;
