/**
 * "Submit to GPU queue…": a dialog with project, presets in order, queue and overrides,
 * a live preview (resolved spec with the layer of each field, and the policy verdict),
 * and the service's message and hint when it refuses the submission.
 */

import { Dialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { configTable, errorBox, h } from './dom';
import type { GpuPlatService } from './request';
import type { IPreset, IPreview, IProject, IRun } from './types';
import { buildRunRequest, configRows, formatResources, ISubmitState } from './viewmodel';

const PREVIEW_DELAY_MS = 250;

export interface ISubmitFormOptions {
  service: GpuPlatService;
  projects: IProject[];
  project: string;
  script: string;
  presets?: string[];
}

/** The dialog body. Holds the form state; `submit()` sends it. */
export class SubmitForm extends Widget {
  constructor(private _opts: ISubmitFormOptions) {
    super();
    this.addClass('jp-GpuPlat-submit');
    const usable = _opts.projects.filter(p => p.role === 'member' || p.role === 'admin');
    this._projects = usable.length ? usable : _opts.projects;
    const project = this._projects.find(p => p.name === _opts.project)?.name ?? this._projects[0]?.name ?? '';
    this._state = {
      script: _opts.script,
      args: '',
      name: '',
      project,
      presets: [..._opts.presets ?? []],
      queue: '',
      gpu: '',
      cpu: '',
      memory: '',
      env: ''
    };

    this._script = this._input('script', 'File', 'experiments/train.py', 'A .py or .ipynb file, relative to the file browser root');
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
    this._gpu = this._input('gpu', 'GPUs', 'from presets', 'Override the number of GPUs', 'number');
    this._gpu.min = '0';
    this._cpu = this._input('cpu', 'CPU', 'from presets', 'Override CPU cores, e.g. 4 or 500m');
    this._memory = this._input('memory', 'Memory', 'from presets', 'Override memory, e.g. 16Gi');
    this._env = h('textarea', {
      class: 'jp-GpuPlat-input',
      name: 'env',
      rows: 2,
      placeholder: 'NAME=value, one per line',
      'aria-label': 'Environment variables'
    });
    this._env.addEventListener('input', () => {
      this._state.env = this._env.value;
      this._changed();
    });
    this._defaults = h('div', { class: 'jp-GpuPlat-muted jp-GpuPlat-defaults' });
    this._preview = h('div', { class: 'jp-GpuPlat-preview', 'aria-live': 'polite', 'aria-label': 'Preview' });
    this._refusal = h('div', { class: 'jp-GpuPlat-refusal' });

    const field = (label: string, control: HTMLElement, hint?: HTMLElement) =>
      h('label', { class: 'jp-GpuPlat-field' }, h('span', { class: 'jp-GpuPlat-fieldLabel' }, label), control, hint ?? null);
    this.node.append(
      h(
        'div',
        { class: 'jp-GpuPlat-form' },
        field('File', this._script),
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
        field('Queue', this._queue),
        h(
          'fieldset',
          { class: 'jp-GpuPlat-overrides' },
          h('legend', null, 'Overrides'),
          field('GPUs', this._gpu),
          field('CPU', this._cpu),
          field('Memory', this._memory),
          field('Environment', this._env)
        )
      ),
      h('div', { class: 'jp-GpuPlat-previewPane' }, h('h3', { class: 'jp-GpuPlat-sectionTitle' }, 'Preview'), this._refusal, this._preview)
    );
    this._script.value = this._state.script;
    this._project.replaceChildren(
      ...this._projects.map(p => h('option', { value: p.name, selected: p.name === project }, p.name))
    );
    void this._loadPresets();
  }

  get state(): ISubmitState {
    return this._state;
  }

  /** The run the service created (after a successful `submit`). */
  getValue(): IRun | null {
    return this._created;
  }

  /** Send the request; on refusal show the service's message and hint and return false. */
  async submit(): Promise<boolean> {
    const { request, errors } = buildRunRequest(this._state);
    if (!request) {
      this._refusal.replaceChildren(errorBox({ message: errors.join(' ') }));
      return false;
    }
    this._refusal.replaceChildren(h('div', { class: 'jp-GpuPlat-muted' }, 'Submitting…'));
    try {
      this._created = await this._opts.service.submit(request);
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

  private async _loadPresets(): Promise<void> {
    const project = this._projects.find(p => p.name === this._state.project);
    try {
      this._available = project ? await this._opts.service.presets(project.name) : [];
    } catch (error) {
      this._available = [];
      this._preview.replaceChildren(errorBox(error));
    }
    const usable = new Set(project?.usable_presets ?? []);
    this._available = this._available.filter(p => usable.has(p.name));
    this._state.presets = this._state.presets.filter(p => usable.has(p));
    this._defaults.textContent = project?.default_presets.length
      ? `Project defaults first: ${project.default_presets.join(', ')}`
      : '';
    this._queue.replaceChildren(
      h('option', { value: '' }, `project default${project?.default_queue ? ` (${project.default_queue})` : ''}`),
      ...(project?.usable_queues ?? []).map(q => h('option', { value: q, selected: q === this._state.queue }, q))
    );
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
    this._presetList.replaceChildren(
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
  }

  /** Any change: clear the last refusal and preview again shortly. */
  private _changed(): void {
    this._refusal.replaceChildren();
    window.clearTimeout(this._timer);
    this._timer = window.setTimeout(() => void this._updatePreview(), PREVIEW_DELAY_MS);
  }

  private async _updatePreview(): Promise<void> {
    const { request, errors } = buildRunRequest(this._state);
    const seq = ++this._seq;
    if (!request) {
      this._preview.dataset.verdict = 'incomplete';
      this._preview.replaceChildren(h('div', { class: 'jp-GpuPlat-muted' }, errors.join(' ')));
      return;
    }
    try {
      const p = await this._opts.service.preview(request);
      if (seq === this._seq) {
        this._renderPreview(p);
      }
    } catch (error) {
      if (seq === this._seq) {
        this._preview.dataset.verdict = 'error';
        this._preview.replaceChildren(errorBox(error));
      }
    }
  }

  private _renderPreview(p: IPreview): void {
    const ok = p.verdict.allowed;
    this._preview.dataset.verdict = ok ? 'allowed' : 'refused';
    const verdict = h(
      'div',
      { class: `jp-GpuPlat-verdict ${ok ? 'jp-mod-allowed' : 'jp-mod-refused'}` },
      h('div', { class: 'jp-GpuPlat-verdictTitle' }, ok ? '✓ Policy allows this run' : '✕ Policy would refuse this run'),
      ...p.verdict.violations.map(v =>
        h(
          'div',
          { class: 'jp-GpuPlat-violation', 'data-code': v.code },
          h('div', { class: 'jp-GpuPlat-errorMessage' }, v.message),
          v.hint ? h('div', { class: 'jp-GpuPlat-errorHint' }, v.hint) : null
        )
      )
    );
    const rows = configRows(p.resolved, p.provenance);
    this._preview.replaceChildren(
      verdict,
      h('div', { class: 'jp-GpuPlat-muted' }, `Layers, weakest first: ${p.layers.join(' < ')}`),
      configTable(rows)
    );
  }

  private _projects: IProject[];
  private _state: ISubmitState;
  private _available: IPreset[] = [];
  private _created: IRun | null = null;
  private _script: HTMLInputElement;
  private _args: HTMLInputElement;
  private _name: HTMLInputElement;
  private _project: HTMLSelectElement;
  private _presetList: HTMLElement;
  private _presetAdd: HTMLSelectElement;
  private _queue: HTMLSelectElement;
  private _gpu: HTMLInputElement;
  private _cpu: HTMLInputElement;
  private _memory: HTMLInputElement;
  private _env: HTMLTextAreaElement;
  private _defaults: HTMLElement;
  private _preview: HTMLElement;
  private _refusal: HTMLElement;
  private _timer = 0;
  private _seq = 0;
}

/**
 * The dialog: Submit sends the request and closes only when the service accepts it;
 * a refusal keeps it open with the service's message and hint.
 */
export class SubmitDialog extends Dialog<IRun | null> {
  constructor(private _form: SubmitForm) {
    super({
      title: 'Submit to GPU queue',
      body: _form,
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Submit' })],
      focusNodeSelector: 'input[name="script"]'
    });
    this.addClass('jp-GpuPlat-submitDialog');
  }

  resolve(index?: number): void {
    const i = index ?? 1;
    const accept = i === 1;
    if (!accept) {
      super.resolve(i);
      return;
    }
    if (this._busy) {
      return;
    }
    this._busy = true;
    void this._form.submit().then(ok => {
      this._busy = false;
      if (ok && !this.isDisposed) {
        super.resolve(i);
      }
    });
  }

  private _busy = false;
}
