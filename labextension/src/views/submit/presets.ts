/**
 * Presets: one card per preset the project may use, with what it requests and where it
 * places work; "Submit a file…" (job presets only) opens the submit dialog with the preset chosen.
 */

import { Widget } from '@lumino/widgets';

import { errorBox, h } from '../dom';
import type { SubmitSource } from '../../models/submitsource';
import type { IPreset, IProject } from '../../api/types';
import { presetView } from '../../models/viewmodel';

/** Why "Start GPU session" is disabled where no notebook can be opened (the panel outside JupyterLab). */
export const SESSIONS_UNAVAILABLE = 'GPU sessions start from JupyterLab: open the GPU platform sidebar there.';

export interface IPresetsOptions {
  source: SubmitSource;
  projects: () => IProject[];
  project: () => string;
  onProject: (name: string) => void;
  onSubmit: (preset: string) => void;
  /** A new notebook on the preset's session kernel (absent: the button stays disabled). */
  onSession?: (preset: string, project: string) => Promise<void>;
}

export class PresetsView extends Widget {
  constructor(private _opts: IPresetsOptions) {
    super();
    this.addClass('jp-GpuPlat-presets');
    this._select = h('select', { class: 'jp-GpuPlat-select', 'aria-label': 'Project' });
    this._select.addEventListener('change', () => {
      this._opts.onProject(this._select.value);
      void this.refresh();
    });
    this._cards = h('div', { class: 'jp-GpuPlat-presetCards' });
    this._error = h('div');
    this.node.append(
      h('label', { class: 'jp-GpuPlat-field jp-GpuPlat-inline' }, h('span', null, 'Project'), this._select),
      this._error,
      this._cards
    );
  }

  async refresh(): Promise<void> {
    const project = this._opts.project();
    this._select.replaceChildren(
      ...this._opts.projects().map(p => h('option', { value: p.name, selected: p.name === project }, p.name))
    );
    if (!project) {
      this._cards.replaceChildren(h('div', { class: 'jp-GpuPlat-empty' }, 'You are not a member of any project.'));
      return;
    }
    try {
      const presets = await this._opts.source.presets(project);
      const order = this._opts.projects().find(p => p.name === project)?.default_presets ?? [];
      this._error.replaceChildren();
      this._render(presets, order);
    } catch (error) {
      this._error.replaceChildren(errorBox(error));
    }
  }

  private _render(presets: IPreset[], defaults: string[]): void {
    if (!presets.length) {
      this._cards.replaceChildren(h('div', { class: 'jp-GpuPlat-empty' }, 'No presets are allowed in this project.'));
      return;
    }
    this._cards.replaceChildren(
      ...presets.map(p => {
        const v = presetView(p);
        // A session preset runs a kernel, not a file: the service refuses it with one, so it offers none.
        const submit = p.kind === 'session' ? null : h(
          'button',
          {
            class: 'jp-GpuPlat-button jp-mod-accept jp-GpuPlat-presetSubmit',
            title: `Submit a .py or .ipynb file with preset ${p.name}`,
            onclick: () => this._opts.onSubmit(p.name)
          },
          'Submit a file…'
        );
        const session = this._sessionButton(p);
        return h(
          'article',
          { class: 'jp-GpuPlat-preset', 'data-preset': p.name, 'aria-label': `Preset ${p.name}` },
          h(
            'div',
            { class: 'jp-GpuPlat-presetHead' },
            h('span', { class: 'jp-GpuPlat-presetName' }, v.name),
            h('span', { class: 'jp-GpuPlat-chip' }, v.kind),
            defaults.includes(p.name) ? h('span', { class: 'jp-GpuPlat-chip', title: 'Applied to every run of the project' }, 'project default') : null
          ),
          v.description ? h('div', { class: 'jp-GpuPlat-presetDesc' }, v.description) : null,
          h(
            'dl',
            { class: 'jp-GpuPlat-presetFacts' },
            h('dt', null, 'Requests'),
            h('dd', null, v.requests),
            h('dt', null, 'Places'),
            h('dd', null, v.places),
            h('dt', null, 'Queue'),
            h('dd', null, v.queue),
            v.limits ? h('dt', null, 'Limits') : null,
            v.limits ? h('dd', null, v.limits) : null,
            v.locked ? h('dt', null, 'Fixed') : null,
            v.locked ? h('dd', null, v.locked) : null
          ),
          h('div', { class: 'jp-GpuPlat-presetActions' }, submit, session)
        );
      })
    );
  }

  /** Only `kind: session` presets lease a kernel: job presets have no session button. */
  private _sessionButton(p: IPreset): HTMLButtonElement | null {
    if (p.kind !== 'session') {
      return null;
    }
    const start = this._opts.onSession;
    if (start) {
      const button = h(
        'button',
        {
          class: 'jp-GpuPlat-button jp-mod-accept jp-GpuPlat-presetSession',
          title: `A new notebook in the file browser's folder, on a GPU session kernel of preset ${p.name}`,
          onclick: () => {
            button.disabled = true; // until the notebook is asked for (its kernel start may wait long)
            start(p.name, this._opts.project())
              .then(() => this._error.replaceChildren())
              .catch(error => this._error.replaceChildren(errorBox(error)))
              .finally(() => (button.disabled = false));
          }
        },
        'Start GPU session'
      );
      return button;
    }
    // aria-disabled (not disabled) keeps it focusable, so keyboard users meet the tooltip too.
    const why = SESSIONS_UNAVAILABLE;
    return h(
      'button',
      {
        class: 'jp-GpuPlat-button jp-GpuPlat-presetSession',
        'aria-disabled': 'true',
        title: why,
        'aria-description': why
      },
      'Start GPU session'
    );
  }

  private _select: HTMLSelectElement;
  private _cards: HTMLElement;
  private _error: HTMLElement;
}
