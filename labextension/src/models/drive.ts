/**
 * Run outputs as a read-only JupyterLab drive: `gpuplat-runs:<run-id>/<path>` reads the
 * platform's outputs API (the listing and the download route), so JupyterLab's own viewers
 * open text, images, CSV and notebooks, and a file browser on the drive shows a run's
 * folder. Nothing is copied; writes, renames and deletes are refused with a reason.
 */

import { ServerConnection, Contents } from '@jupyterlab/services';
import { URLExt } from '@jupyterlab/coreutils';
import { ISignal, Signal } from '@lumino/signaling';

import { API_NAMESPACE, GpuPlatService } from '../api/request';
import type { IOutputFile } from '../api/types';

export const DRIVE_NAME = 'gpuplat-runs';

/** How long a run's listing is reused (a file browser asks for each folder it shows). */
const LISTING_TTL_MS = 2000;

export const READ_ONLY_MESSAGE =
  `${DRIVE_NAME} is read-only: a run's outputs stay as the run wrote them. ` +
  'Download a file or open it and use "Save As…" to keep an editable copy.';

const MIME: Record<string, string> = {
  txt: 'text/plain',
  log: 'text/plain',
  md: 'text/markdown',
  py: 'text/x-python',
  json: 'application/json',
  csv: 'text/csv',
  tsv: 'text/tab-separated-values',
  yaml: 'text/x-yaml',
  yml: 'text/x-yaml',
  html: 'text/html',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  svg: 'image/svg+xml',
  webp: 'image/webp',
  ipynb: 'application/x-ipynb+json'
};

/** A global drive path of one run file (what the document manager opens). */
export function drivePath(runId: string, path = ''): string {
  const rest = path.replace(/^\/+/, '');
  return `${DRIVE_NAME}:${runId}${rest ? `/${rest}` : ''}`;
}

/** `<run-id>/<path>` split into the run and the path inside it. */
export function splitLocal(localPath: string): { runId: string; path: string } {
  const clean = localPath.replace(/^\/+|\/+$/g, '');
  const slash = clean.indexOf('/');
  return slash < 0 ? { runId: clean, path: '' } : { runId: clean.slice(0, slash), path: clean.slice(slash + 1) };
}

function mimeOf(name: string): string {
  const ext = name.includes('.') ? name.split('.').pop()!.toLowerCase() : '';
  return MIME[ext] ?? 'application/octet-stream';
}

function iso(seconds: number | null | undefined): string {
  return new Date((seconds ?? 0) * 1000).toISOString();
}

function base64(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

function dirModel(path: string, content: Contents.IModel[] | null, modified = 0): Contents.IModel {
  return {
    name: path.split('/').pop() || '',
    path,
    type: 'directory',
    writable: false,
    created: iso(modified),
    last_modified: iso(modified),
    mimetype: '',
    format: content ? 'json' : null,
    content
  };
}

/** The immediate children of `dir` in a run's (recursive) listing. */
export function childrenOf(runId: string, dir: string, files: IOutputFile[]): Contents.IModel[] {
  const prefix = dir ? `${dir}/` : '';
  const dirs = new Map<string, number>();
  const out: Contents.IModel[] = [];
  for (const f of files) {
    if (!f.path.startsWith(prefix)) {
      continue;
    }
    const rest = f.path.slice(prefix.length);
    const slash = rest.indexOf('/');
    if (slash >= 0) {
      const name = rest.slice(0, slash);
      dirs.set(name, Math.max(dirs.get(name) ?? 0, f.modified));
      continue;
    }
    out.push({
      name: rest,
      path: `${runId}/${f.path}`,
      type: rest.endsWith('.ipynb') ? 'notebook' : 'file',
      writable: false,
      created: iso(f.modified),
      last_modified: iso(f.modified),
      mimetype: mimeOf(rest),
      format: null,
      content: null,
      size: f.size
    });
  }
  const folders = [...dirs].map(([name, at]) => dirModel(`${runId}/${prefix}${name}`, null, at));
  return [...folders, ...out];
}

export class RunOutputsDrive implements Contents.IDrive {
  constructor(private _service: GpuPlatService) {}

  readonly name = DRIVE_NAME;

  get serverSettings(): ServerConnection.ISettings {
    return this._service.settings;
  }

  get fileChanged(): ISignal<this, Contents.IChangedArgs> {
    return this._fileChanged;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    this._disposed = true;
    Signal.clearData(this);
  }

  async get(localPath: string, options: Contents.IFetchOptions = {}): Promise<Contents.IModel> {
    const { runId, path } = splitLocal(localPath);
    if (!runId) {
      return this._root(options.content !== false);
    }
    const files = await this._listing(runId);
    const file = files.find(f => f.path === path);
    if (!file) {
      const isDir = !path || files.some(f => f.path.startsWith(`${path}/`));
      if (!isDir) {
        throw new Error(`${path} is not an output of run ${runId} (see the run's outputs list)`);
      }
      const model = dirModel(path ? `${runId}/${path}` : runId, options.content === false ? null : childrenOf(runId, path, files));
      return model;
    }
    const name = path.split('/').pop() || path;
    const type: Contents.ContentType = name.endsWith('.ipynb') ? 'notebook' : 'file';
    const base = {
      name,
      path: `${runId}/${path}`,
      type,
      writable: false,
      created: iso(file.modified),
      last_modified: iso(file.modified),
      mimetype: mimeOf(name),
      size: file.size
    };
    if (options.content === false) {
      return { ...base, format: null, content: null };
    }
    const blob = await this._service.outputBlob(runId, path);
    if (type === 'notebook' && options.format !== 'text' && options.format !== 'base64') {
      return { ...base, format: 'json', content: JSON.parse(await blob.text()) };
    }
    const wantsBase64 = options.format === 'base64' || (options.format !== 'text' && !/^text\/|json|svg/.test(base.mimetype));
    if (wantsBase64) {
      return { ...base, format: 'base64', content: base64(new Uint8Array(await blob.arrayBuffer())) };
    }
    return { ...base, format: 'text', content: await blob.text() };
  }

  async getDownloadUrl(localPath: string): Promise<string> {
    const { runId, path } = splitLocal(localPath);
    const p = path.split('/').map(encodeURIComponent).join('/');
    return URLExt.join(this.serverSettings.baseUrl, API_NAMESPACE, 'runs', encodeURIComponent(runId), 'outputs', p);
  }

  newUntitled(): Promise<Contents.IModel> {
    return this._refuse('create files');
  }

  delete(): Promise<void> {
    return this._refuse('delete files');
  }

  rename(): Promise<Contents.IModel> {
    return this._refuse('rename files');
  }

  save(): Promise<Contents.IModel> {
    return this._refuse('save files');
  }

  copy(): Promise<Contents.IModel> {
    return this._refuse('copy files into a run');
  }

  createCheckpoint(): Promise<Contents.ICheckpointModel> {
    return this._refuse('keep checkpoints');
  }

  async listCheckpoints(): Promise<Contents.ICheckpointModel[]> {
    return [];
  }

  restoreCheckpoint(): Promise<void> {
    return this._refuse('restore checkpoints');
  }

  deleteCheckpoint(): Promise<void> {
    return this._refuse('delete checkpoints');
  }

  private _refuse<T>(what: string): Promise<T> {
    return Promise.reject(new Error(`Cannot ${what}: ${READ_ONLY_MESSAGE}`));
  }

  /** The drive's root: the runs the caller may see, newest first, as folders. */
  private async _root(content: boolean): Promise<Contents.IModel> {
    if (!content) {
      return dirModel('', null);
    }
    const page = await this._service.listRuns({}, null, 200);
    return dirModel(
      '',
      page.runs.map(r => dirModel(r.id, null, r.updated_at ?? r.created_at ?? 0))
    );
  }

  private _listing(runId: string): Promise<IOutputFile[]> {
    const now = Date.now();
    const hit = this._cache.get(runId);
    if (hit && now - hit.at < LISTING_TTL_MS) {
      return hit.files;
    }
    const files = this._service.outputs(runId);
    this._cache.set(runId, { at: now, files });
    files.catch(() => this._cache.delete(runId));
    return files;
  }

  private _fileChanged = new Signal<this, Contents.IChangedArgs>(this);
  private _disposed = false;
  private _cache = new Map<string, { at: number; files: Promise<IOutputFile[]> }>();
}
