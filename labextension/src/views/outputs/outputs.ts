/**
 * Opening run outputs in JupyterLab: one file in a main-area tab through the document
 * manager (JupyterLab's own text, image, CSV and notebook viewers read the `gpuplat-runs`
 * drive), and a run's folder in a file browser on that drive. Notebooks from the drive open
 * read-only with their outputs and start no kernel.
 */

import type { JupyterFrontEnd } from '@jupyterlab/application';
import { Notification } from '@jupyterlab/apputils';
import type { IDocumentManager } from '@jupyterlab/docmanager';
import type { DocumentRegistry } from '@jupyterlab/docregistry';
import { FileBrowser, FilterFileBrowserModel } from '@jupyterlab/filebrowser';
import type { LabIcon } from '@jupyterlab/ui-components';
import type { IDisposable } from '@lumino/disposable';
import type { Widget } from '@lumino/widgets';

import { DRIVE_NAME, drivePath } from '../../models/drive';

const NO_KERNEL = { shouldStart: false, canStart: false, autoStartDefault: false };

/** What a notebook panel offers us (NotebookPanel: its cells' read-only switch). */
interface INotebookPanelLike extends Widget {
  readonly content: { readonly widgets: ReadonlyArray<{ readOnly: boolean }> };
}

export function isDrivePath(path: string): boolean {
  return path.startsWith(`${DRIVE_NAME}:`);
}

/**
 * A widget extension for notebooks: one from the drive starts no kernel (it shows what the run
 * computed) and its cells are read-only, as the drive refuses to save.
 */
export function readOnlyNotebooks(): DocumentRegistry.IWidgetExtension<Widget, DocumentRegistry.IModel> {
  return {
    createNew: (widget: Widget, context: DocumentRegistry.IContext<DocumentRegistry.IModel>): IDisposable | void => {
      if (!isDrivePath(context.path)) {
        return;
      }
      const session = context.sessionContext;
      session.kernelPreference = { ...session.kernelPreference, ...NO_KERNEL };
      widget.addClass('jp-GpuPlat-runOutput');
      widget.node.dataset.readOnly = 'true';
      void context.ready.then(() => {
        for (const cell of (widget as INotebookPanelLike).content?.widgets ?? []) {
          cell.readOnly = true;
        }
        // Read-only cells are marked in their metadata: not a change to save (or to ask about).
        context.model.dirty = false;
      });
    }
  };
}

export interface IOutputsOpenerOptions {
  app: JupyterFrontEnd;
  docManager: IDocumentManager | null;
  icon: LabIcon;
}

export class OutputsOpener {
  constructor(private _opts: IOutputsOpenerOptions) {}

  /** One output file in a main-area tab (an open one is revealed). */
  async openOutput(runId: string, path: string): Promise<Widget | undefined> {
    const target = drivePath(runId, path);
    const { app, docManager } = this._opts;
    try {
      // Check it exists first: the document manager would open an empty, failing tab.
      await app.serviceManager.contents.get(target, { content: false });
    } catch (error) {
      Notification.error(`Open ${path} of ${runId}: ${(error as Error).message}`, { autoClose: 8000 });
      return undefined;
    }
    if (!docManager) {
      return (await app.commands.execute('docmanager:open', { path: target })) as Widget | undefined;
    }
    const kernel = path.endsWith('.ipynb') ? NO_KERNEL : undefined;
    const widget = docManager.openOrReveal(target, undefined, undefined, undefined, kernel);
    if (widget) {
      widget.node.dataset.runId = runId;
      widget.node.dataset.outputPath = path;
      widget.title.caption = `${path} of run ${runId} (read-only)`;
    }
    return widget;
  }

  /**
   * The run's files in a file browser on the drive, in the main area (one per run). Built
   * outside the file browser factory on purpose: a browser in the factory's tracker becomes
   * "the current file browser" that File → New and the Launcher create files in, and this
   * drive is read-only. Its navigation stops at the run's folder, and JupyterLab's file
   * context menu (whose commands act on the tracked browser) is left out.
   */
  async openFolder(runId: string): Promise<FileBrowser | undefined> {
    const { app, docManager, icon } = this._opts;
    if (!docManager) {
      Notification.error('Open run folder needs JupyterLab’s document manager, which is not loaded.');
      return undefined;
    }
    const id = `jp-GpuPlat-runFolder-${runId}`;
    const open = this._folders.get(runId);
    if (open?.isAttached) {
      app.shell.activateById(id);
      return open;
    }
    open?.dispose(); // closing a tab detaches a plain widget; a closed folder opens afresh
    const model = new FilterFileBrowserModel({ manager: docManager, driveName: DRIVE_NAME, root: drivePath(runId), refreshInterval: 5000 });
    const browser = new FileBrowser({ id, model });
    browser.node.dataset.jpSuppressContextMenu = '';
    browser.id = id;
    browser.addClass('jp-GpuPlat-runFolder');
    browser.node.dataset.runId = runId;
    browser.title.label = `${runId} files`;
    browser.title.caption = `The files of run ${runId} (read-only: ${DRIVE_NAME}:${runId})`;
    browser.title.icon = icon;
    browser.title.closable = true;
    this._folders.set(runId, browser);
    browser.disposed.connect(() => {
      this._folders.delete(runId);
      model.dispose();
    });
    app.shell.add(browser, 'main');
    app.shell.activateById(id);
    await browser.model.cd(`/${runId}`);
    return browser;
  }

  private _folders = new Map<string, FileBrowser>();
}
