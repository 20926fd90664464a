import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, Notification } from '@jupyterlab/apputils';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStateDB } from '@jupyterlab/statedb';
import { LabIcon } from '@jupyterlab/ui-components';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';

import { GpuPlatPanel, IPanelState } from './panel';
import { GpuPlatService } from './request';
import { INotebookLike, SessionsController } from './sessions';
import { SubmitDialog, SubmitForm } from './submit';
import { DEFAULT_NOTIFY, INotifySettings } from './viewmodel';

export { requestAPI, GpuPlatAPIError, GpuPlatService, API_NAMESPACE } from './request';
export { GpuPlatPanel } from './panel';

/** The id of the sidebar widget (also its restorer key). */
export const SIDEBAR_ID = 'jupyter-gpuplat-sidebar';
const PLUGIN_ID = 'jupyter-gpuplat:plugin';
const STATE_KEY = 'jupyter-gpuplat:panel';

export const CommandIDs = {
  submit: 'gpuplat:submit',
  open: 'gpuplat:open',
  openRun: 'gpuplat:open-run',
  startSession: 'gpuplat:start-session'
};

const SUBMITTABLE = /\.(py|ipynb)$/;

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

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'GPU platform sidebar: runs, queues, presets, explain, live logs, submit from the file browser.',
  autoStart: true,
  optional: [ILayoutRestorer, ICommandPalette, IDefaultFileBrowser, ISettingRegistry, IStateDB],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    browser: IDefaultFileBrowser | null,
    settingRegistry: ISettingRegistry | null,
    state: IStateDB | null
  ) => {
    const service = new GpuPlatService();

    /** The file selected in the file browser, if it is a .py or .ipynb file. */
    const selectedFile = (): string => {
      const first = browser?.selectedItems().next();
      if (!first || first.done) {
        return '';
      }
      const model = first.value;
      return model.type !== 'directory' && SUBMITTABLE.test(model.path) ? model.path : '';
    };

    const openSubmit = async (path: string, preset?: string) => {
      await panel.start();
      const form = new SubmitForm({
        service,
        projects: panel.projects,
        project: panel.currentProject,
        script: path,
        presets: preset ? [preset] : []
      });
      const result = await new SubmitDialog(form).launch();
      const run = result.button.accept ? result.value : null;
      if (run) {
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
      service,
      submit: preset => void openSubmit(selectedFile(), preset),
      startSession
    });
    const sessions = new SessionsController({
      service,
      kernelspecs: app.serviceManager.kernelspecs,
      openRun: id => void app.commands.execute(CommandIDs.openRun, { id }),
      clockOffset: () => panel.clockOffset
    });
    panel.eventReceived.connect((_, ev) => sessions.onEvent(ev));
    panel.streamReady.connect(() => sessions.onReady());
    panel.notifier.ignore = id => sessions.owns(id);
    void panel.start().then(() => (sessions.user = panel.whoami?.user ?? ''));
    app.docRegistry.addWidgetExtension('Notebook', {
      createNew: (widget, context) => sessions.createNew(widget as unknown as INotebookLike, context)
    });
    panel.id = SIDEBAR_ID;
    panel.title.icon = gpuIcon;
    panel.title.caption = 'GPU platform: runs, queues, presets and insights';
    app.shell.add(panel, 'left', { rank: 900 });
    restorer?.add(panel, SIDEBAR_ID);

    app.commands.addCommand(CommandIDs.submit, {
      label: 'Submit to GPU queue…',
      caption: 'Run a .py or .ipynb file on the GPU platform: pick presets and a queue, preview, submit',
      icon: gpuIcon,
      execute: args => openSubmit((args.path as string) || selectedFile(), args.preset as string | undefined)
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
      label: 'Open GPU run',
      execute: args => {
        app.shell.activateById(SIDEBAR_ID);
        return panel.openRun(String(args.id));
      }
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
