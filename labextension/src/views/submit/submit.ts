/**
 * "Submit to GPU queue…" (and "Submit again…"): a dialog with project, presets in order
 * (the project's default presets first, fixed), queue and overrides, a live preview
 * (resolved spec with the layer of each field, and the policy verdict), and the service's
 * message and hint when it refuses. Submit stays disabled while the preview refuses or the
 * form is incomplete, with the reason beside it; fields the preview's `locks` name show as locked.
 */

import { ISignal, Signal } from '@lumino/signaling';
import { lockIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { errorBox, h } from '../dom';
import { previewParts } from './previewview';
import { GpuPlatAPIError } from '../../api/errors';
import type { SubmitSource } from '../../models/submitsource';
import type { IPreset, IPreview, IProject, IRun, IRunRequest } from '../../api/types';
import {
  FormChange,
  buildRunRequest,
  formatResources,
  ISubmitState,
  layerLabel,
  lockOf
} from '../../models/viewmodel';

const PREVIEW_DELAY_MS = 250;

export interface ISubmitFormOptions {
  source: SubmitSource;
  projects: IProject[];
  project: string;
  script: string;
  presets?: string[];
  /** The whole form prefilled ("Submit again…" from a run's record); wins over the above. */
  initial?: ISubmitState;
  /** The run request being resubmitted: what the form does not edit is sent as it was. */
  base?: IRunRequest | null;
}

/** Whether Submit may be pressed now, and why not. */
export interface ISubmittable {
  ok: boolean;
  reason: string;
}

/** The dialog body. Holds the form state; `submit()` sends it. */
export class SubmitForm extends Widget {
  constructor(private _opts: ISubmitFormOptions) {
    super();
    this.addClass('jp-GpuPlat-submit');
    const usable = _opts.projects.filter(p => p.may_submit);
    this._projects = usable.length ? usable : _opts.projects;
    const wanted = _opts.initial?.project ?? _opts.project;
    const project = this._projects.find(p => p.name === wanted)?.name ?? this._projects[0]?.name ?? '';
    this._state = _opts.initial
      ? { ..._opts.initial, project, presets: [..._opts.initial.presets] }
      : {
          script: _opts.script,
          args: '',
          name: '',
          project,
          presets: [...(_opts.presets ?? [])],
          queue: '',
          gpu: '',
          cpu: '',
          memory: '',
          env: '',
          params: ''
        };

    this._script = this._input('script', 'File', 'experiments/train.py', 'A .py or .ipynb file, relative to the file browser root');
    this._command = this._input('command', 'Command', 'python train.py --lr 0.1', 'A command line (instead of a file)');
    this._args = this._input('args', 'Arguments', '--epochs 3', 'Passed to the script; quotes group words');
    this._name = this._input('name', 'Run name', 'defaults to the file name', '');
    this._project = h('select', { class: 'jp-GpuPlat-select', name: 'project', 'aria-label': 'Project' });
    this._project.addEventListener('change', () => {
      this._state.project = this._project.value;
      this._state.presets = [];
      this._state.queue = '';
      void this._loadPresets();
    });
    this._presetList = h('ol', { class: 'jp-GpuPlat-presetOrder', 'aria-label': 'Presets, applied in this order' });
    this._presetAdd = h('select', { class: 'jp-GpuPlat-select', name: 'preset-add', 'aria-label': 'Add a preset' });
    this._presetAdd.addEventListener('change', () => {
      if (this._presetAdd.value) {
        this._state.presets.push(this._presetAdd.value);
        this._renderPresets();
        this._changed();
      }
    });
    this._queue = h('select', { class: 'jp-GpuPlat-select', name: 'queue', 'aria-label': 'Queue' });
    this._queue.addEventListener('change', () => {
      this._state.queue = this._queue.value;
      this._changed();
    });
    this._queueLock = h('span', { class: 'jp-GpuPlat-muted jp-GpuPlat-lockNote' });
    this._gpu = this._input('gpu', 'GPUs', 'from presets', 'Override the number of GPUs', 'number');
    this._gpu.min = '0';
    this._cpu = this._input('cpu', 'CPU', 'from presets', 'Override CPU cores, e.g. 4 or 500m');
    this._memory = this._input('memory', 'Memory', 'from presets', 'Override memory, e.g. 16Gi');
    this._env = this._textarea('env', 'Environment variables', 'NAME=value, one per line');
    this._params = this._textarea('params', 'Params', 'lr=0.1, one per line (the run and Compare show them)');
    this._defaults = h('div', { class: 'jp-GpuPlat-muted jp-GpuPlat-defaults' });
    this._preview = h('div', { class: 'jp-GpuPlat-preview', 'aria-live': 'polite', 'aria-label': 'Preview' });
    this._refusal = h('div', { class: 'jp-GpuPlat-refusal' });

    const field = (label: string, control: HTMLElement, hint?: HTMLElement) =>
      h('label', { class: 'jp-GpuPlat-field' }, h('span', { class: 'jp-GpuPlat-fieldLabel' }, label), control, hint ?? null);
    // A command run is resubmitted as a command; a file run (and a new run) as a file.
    const commandRun = this._state.command !== undefined && !this._state.script;
    this.node.append(
      h(
        'div',
        { class: 'jp-GpuPlat-form' },
        commandRun ? field('Command', this._command) : field('File', this._script),
        field('Arguments', this._args),
        field('Run name', this._name),
        field('Project', this._project),
        h(
          'div',
          { class: 'jp-GpuPlat-field' },
          h('span', { class: 'jp-GpuPlat-fieldLabel' }, 'Presets (in order)'),
          this._defaults,
          this._presetList,
          this._presetAdd
        ),
        field('Queue', this._queue, this._queueLock),
        h(
          'fieldset',
          { class: 'jp-GpuPlat-overrides' },
          h('legend', null, 'Overrides'),
          field('GPUs', this._gpu),
          field('CPU', this._cpu),
          field('Memory', this._memory),
          field('Environment', this._env),
          field('Params', this._params)
        )
      ),
      h('div', { class: 'jp-GpuPlat-previewPane' }, h('h3', { class: 'jp-GpuPlat-sectionTitle' }, 'Preview'), this._refusal, this._preview)
    );
    this._script.value = this._state.script;
    this._command.value = this._state.command ?? '';
    this._args.value = this._state.args;
    this._name.value = this._state.name;
    this._gpu.value = this._state.gpu;
    this._cpu.value = this._state.cpu;
    this._memory.value = this._state.memory;
    this._env.value = this._state.env;
    this._params.value = this._state.params ?? '';
    this._project.replaceChildren(
      ...this._projects.map(p => h('option', { value: p.name, selected: p.name === project }, p.name))
    );
    void this._loadPresets();
  }

  get state(): ISubmitState {
    return this._state;
  }

  /** Emitted whenever Submit becomes possible or not (with the reason). */
  get submittableChanged(): ISignal<this, ISubmittable> {
    return this._submittableChanged;
  }

  get submittable(): ISubmittable {
    return this._submittable;
  }

  /** The run the service created (after a successful `submit`). */
  getValue(): IRun | null {
    return this._created;
  }

  /** Send the request; on refusal show the service's message and hint and return false. */
  async submit(): Promise<boolean> {
    const { request, errors } = buildRunRequest(this._state, this._opts.base);
    if (!request) {
      this._refusal.replaceChildren(errorBox({ message: errors.join(' ') }));
      return false;
    }
    this._refusal.replaceChildren(h('div', { class: 'jp-GpuPlat-muted' }, 'Submitting…'));
    try {
      this._created = await this._opts.source.submit(request);
      this._refusal.replaceChildren();
      return true;
    } catch (error) {
      const box = errorBox(error);
      box.classList.add('jp-GpuPlat-refused');
      box.prepend(h('div', { class: 'jp-GpuPlat-refusedTitle' }, 'The service refused this run'));
      this._refusal.replaceChildren(box);
      return false;
    }
  }

  private _input(key: keyof ISubmitState, label: string, placeholder: string, title: string, type = 'text'): HTMLInputElement {
    const el = h('input', { class: 'jp-GpuPlat-input', name: key, type, placeholder, title, 'aria-label': label });
    el.addEventListener('input', () => {
      (this._state as unknown as Record<string, string>)[key] = el.value;
      this._changed();
    });
    return el;
  }

  private _textarea(key: 'env' | 'params', label: string, placeholder: string): HTMLTextAreaElement {
    const el = h('textarea', { class: 'jp-GpuPlat-input', name: key, rows: 2, placeholder, 'aria-label': label });
    el.addEventListener('input', () => {
      this._state[key] = el.value;
      this._changed();
    });
    return el;
  }

  private _currentProject(): IProject | undefined {
    return this._projects.find(p => p.name === this._state.project);
  }

  private async _loadPresets(): Promise<void> {
    const project = this._currentProject();
    try {
      this._all = project ? await this._opts.source.presets(project.name) : [];
    } catch (error) {
      this._all = [];
      this._preview.replaceChildren(errorBox(error));
    }
    const defaults = new Set(project?.default_presets ?? []);
    const usable = new Set(project?.usable_presets ?? []);
    // The project's defaults are always applied first: they are not offered again. A session
    // preset runs a kernel, not a file or command (the service refuses it here): not offered either.
    const offered = new Set(this._all.filter(p => p.kind !== 'session').map(p => p.name));
    this._available = this._all.filter(p => usable.has(p.name) && !defaults.has(p.name) && offered.has(p.name));
    this._state.presets = this._state.presets.filter(p => usable.has(p) && !defaults.has(p) && offered.has(p));
    this._defaults.textContent = defaults.size ? 'Project default presets are applied first; add more after them.' : '';
    this._renderPresets();
    this._changed();
  }

  private _renderPresets(): void {
    const chosen = this._state.presets;
    const move = (i: number, d: number) => {
      const j = i + d;
      [chosen[i], chosen[j]] = [chosen[j], chosen[i]];
      this._renderPresets();
      this._changed();
    };
    const defaults = (this._currentProject()?.default_presets ?? []).map(name => {
      const p = this._all.find(x => x.name === name);
      return h(
        'li',
        {
          class: 'jp-GpuPlat-presetChosen jp-GpuPlat-presetDefault',
          'data-preset': name,
          'data-default': 'true',
          title: `Project ${this._state.project} applies ${name} to every run`
        },
        h('span', { class: 'jp-GpuPlat-presetName' }, name),
        h('span', { class: 'jp-GpuPlat-muted' }, p ? formatResources(p.resources) : ''),
        h('span', { class: 'jp-GpuPlat-spacer' }),
        h('span', { class: 'jp-GpuPlat-chip' }, lockGlyph(), 'project default')
      );
    });
    this._presetList.replaceChildren(
      ...defaults,
      ...chosen.map((name, i) => {
        const p = this._available.find(x => x.name === name);
        return h(
          'li',
          { class: 'jp-GpuPlat-presetChosen', 'data-preset': name },
          h('span', { class: 'jp-GpuPlat-presetName' }, name),
          h('span', { class: 'jp-GpuPlat-muted' }, p ? formatResources(p.resources) : ''),
          h('span', { class: 'jp-GpuPlat-spacer' }),
          h('button', { class: 'jp-GpuPlat-iconButton', type: 'button', title: `Apply ${name} earlier`, 'aria-label': `Move ${name} up`, disabled: i === 0, onclick: () => move(i, -1) }, '↑'),
          h('button', { class: 'jp-GpuPlat-iconButton', type: 'button', title: `Apply ${name} later`, 'aria-label': `Move ${name} down`, disabled: i === chosen.length - 1, onclick: () => move(i, 1) }, '↓'),
          h(
            'button',
            {
              class: 'jp-GpuPlat-iconButton',
              type: 'button',
              title: `Remove ${name}`,
              'aria-label': `Remove ${name}`,
              onclick: () => {
                chosen.splice(i, 1);
                this._renderPresets();
                this._changed();
              }
            },
            '✕'
          )
        );
      })
    );
    const rest = this._available.filter(p => !chosen.includes(p.name));
    this._presetAdd.replaceChildren(
      h('option', { value: '' }, rest.length ? 'Add a preset…' : 'No more presets'),
      ...rest.map(p => h('option', { value: p.name }, `${p.name}: ${p.description || formatResources(p.resources)}`))
    );
    this._presetAdd.value = '';
    this._renderLocks(null);
  }

  /**
   * The queue select (and the resource fields) as the last preview leaves them: a field its
   * `locks` name is disabled and says which layer locked it (the service resolved the presets;
   * none is derived here, so before the first preview answers nothing shows as locked); otherwise
   * the default option names the queue the run gets and the layer that chose it (from the preview).
   */
  private _renderLocks(p: IPreview | null): void {
    if (p) {
      this._locks = p.locks;
      this._lockedQueue = p.locks.queue !== undefined ? String(p.resolved.queue ?? '') : '';
    }
    const locks = this._locks;
    const project = this._currentProject();
    const queueLock = lockOf(locks, 'queue');
    let cleared = false;
    if (queueLock) {
      cleared = this._state.queue !== '';
      this._state.queue = '';
      this._queue.disabled = true;
      this._queue.dataset.locked = queueLock;
      this._queue.title = `Locked: ${layerLabel(queueLock)} fixes the queue; remove it to choose another`;
      // An option holds text only: the lock is drawn beside the select (an icon: the emoji needs a font).
      this._queue.replaceChildren(h('option', { value: '' }, `${this._lockedQueue} — locked, set by ${layerLabel(queueLock)}`));
      this._queueLock.replaceChildren(lockGlyph(), 'locked');
    } else {
      this._queueLock.replaceChildren();
      this._queue.disabled = false;
      delete this._queue.dataset.locked;
      this._queue.title = 'The queue the run waits in';
      const resolved = p && !this._state.queue ? String(p.resolved.queue ?? '') : '';
      const label = resolved
        ? `${resolved} · set by ${layerLabel(p?.provenance.queue)}`
        : `project default${project?.default_queue ? ` (${project.default_queue})` : ''}`;
      this._queue.replaceChildren(
        h('option', { value: '' }, label),
        ...(project?.usable_queues ?? []).map(q => h('option', { value: q, selected: q === this._state.queue }, q))
      );
      this._queue.value = this._state.queue;
    }
    cleared = this._lockInput(this._gpu, lockOf(locks, 'resources.gpu'), 'gpu') || cleared;
    cleared = this._lockInput(this._cpu, lockOf(locks, 'resources.cpu'), 'cpu') || cleared;
    cleared = this._lockInput(this._memory, lockOf(locks, 'resources.memory'), 'memory') || cleared;
    cleared = this._lockInput(this._env, lockOf(locks, 'env'), 'env') || cleared;
    if (cleared && p) {
      // the preview judged a value a lock now drops: judge the request without it
      this._changed();
    }
  }

  /** Lock or unlock one field; true when a value the user typed was dropped. */
  private _lockInput(el: HTMLInputElement | HTMLTextAreaElement, layer: string | undefined, key: 'gpu' | 'cpu' | 'memory' | 'env'): boolean {
    let cleared = false;
    if (layer) {
      if (this._state[key]) {
        this._state[key] = '';
        el.value = '';
        cleared = true;
      }
      el.disabled = true;
      el.dataset.locked = layer;
      el.placeholder = `locked, set by ${layerLabel(layer)}`;
    } else if (el.dataset.locked) {
      el.disabled = false;
      delete el.dataset.locked;
      el.placeholder = key === 'env' ? 'NAME=value, one per line' : 'from presets';
    }
    return cleared;
  }

  /** A sooner way the preview offered: the form takes its queue and resources, and previews again. */
  private _use(change: FormChange): void {
    Object.assign(this._state, change);
    this._gpu.value = this._state.gpu;
    this._cpu.value = this._state.cpu;
    this._memory.value = this._state.memory;
    this._renderLocks(null); // the queue select shows the new queue
    this._changed();
  }

  /** Any change: clear the last refusal and preview again shortly. */
  private _changed(): void {
    this._refusal.replaceChildren();
    window.clearTimeout(this._timer);
    this._setSubmittable(false, 'Checking the policy…');
    this._timer = window.setTimeout(() => void this._updatePreview(), PREVIEW_DELAY_MS);
  }

  private _setSubmittable(ok: boolean, reason: string): void {
    this._submittable = { ok, reason };
    this._submittableChanged.emit(this._submittable);
  }

  private async _updatePreview(): Promise<void> {
    const { request, errors } = buildRunRequest(this._state, this._opts.base);
    const seq = ++this._seq;
    if (!request) {
      // Nothing to judge yet: no verdict, and Submit waits for what is missing.
      this._preview.dataset.verdict = 'incomplete';
      this._preview.replaceChildren(h('div', { class: 'jp-GpuPlat-muted jp-GpuPlat-incomplete' }, errors.join(' ')));
      this._setSubmittable(false, errors.join(' '));
      return;
    }
    try {
      const p = await this._opts.source.preview(request);
      if (seq === this._seq) {
        this._renderPreview(p);
      }
    } catch (error) {
      if (seq === this._seq) {
        this._preview.dataset.verdict = 'error';
        this._preview.replaceChildren(errorBox(error));
        // A 4xx is the service refusing this request (e.g. a session preset with a script).
        const refused = error instanceof GpuPlatAPIError && error.status >= 400 && error.status < 500;
        this._setSubmittable(false, `${refused ? 'Refused' : 'The preview failed'}: ${(error as Error).message}`);
      }
    }
  }

  private _renderPreview(p: IPreview): void {
    const ok = p.verdict.allowed;
    this._preview.dataset.verdict = ok ? 'allowed' : 'refused';
    this._preview.replaceChildren(...previewParts(p, change => this._use(change)));
    this._renderLocks(p);
    const first = p.verdict.violations[0];
    this._setSubmittable(ok, ok ? '' : `Refused: ${first?.message ?? 'the policy would refuse this run'}`);
  }

  private _projects: IProject[];
  /** The last preview's `locks` (path → layer) and the queue it locked: shown until the next preview. */
  private _locks: Record<string, string> = {};
  private _lockedQueue = '';
  private _state: ISubmitState;
  private _all: IPreset[] = [];
  private _available: IPreset[] = [];
  private _created: IRun | null = null;
  private _script: HTMLInputElement;
  private _command: HTMLInputElement;
  private _args: HTMLInputElement;
  private _name: HTMLInputElement;
  private _project: HTMLSelectElement;
  private _presetList: HTMLElement;
  private _presetAdd: HTMLSelectElement;
  private _queue: HTMLSelectElement;
  private _queueLock: HTMLElement;
  private _gpu: HTMLInputElement;
  private _cpu: HTMLInputElement;
  private _memory: HTMLInputElement;
  private _env: HTMLTextAreaElement;
  private _params: HTMLTextAreaElement;
  private _defaults: HTMLElement;
  private _preview: HTMLElement;
  private _refusal: HTMLElement;
  private _timer = 0;
  private _seq = 0;
  private _submittable: ISubmittable = { ok: false, reason: 'Checking the policy…' };
  private _submittableChanged = new Signal<this, ISubmittable>(this);
}

/** JupyterLab's lock icon, inline with text (an SVG: renders without an emoji font). */
function lockGlyph(): HTMLElement {
  return lockIcon.element({ tag: 'span', className: 'jp-GpuPlat-lockIcon', title: 'locked' });
}
