/**
 * The submit preview as the user reads it: the policy's verdict, the service's notes, where it starts
 * and waits, when it would start and the ways to start sooner, the layered config.
 */

import { configTable, h } from '../dom';
import type { IPreview } from '../../api/types';
import { FormChange, configRows, previewEstimate } from '../../models/viewmodel';

/**
 * The verdict (each refusing rule with its hint; a caution, not a plain "allows", when the service
 * adds a note such as "no GPU"), the notes, what it would wait for, its working directory, the
 * layers and the resolved config. All of it as the service answered it.
 */
export function previewParts(p: IPreview, use?: (change: FormChange) => void): HTMLElement[] {
  const ok = p.verdict.allowed;
  const notes = ok ? p.notes ?? [] : [];
  const caution = ok && notes.length > 0;
  const verdict = h(
    'div',
    { class: `jp-GpuPlat-verdict ${!ok ? 'jp-mod-refused' : caution ? 'jp-mod-caution' : 'jp-mod-allowed'}` },
    h(
      'div',
      { class: 'jp-GpuPlat-verdictTitle' },
      !ok ? '✕ Policy would refuse this run' : caution ? '⚠ Policy allows this run, with a caution' : '✓ Policy allows this run'
    ),
    ...p.verdict.violations.map(v =>
      h(
        'div',
        { class: 'jp-GpuPlat-violation', 'data-code': v.code },
        h('div', { class: 'jp-GpuPlat-errorMessage' }, v.message),
        v.hint ? h('div', { class: 'jp-GpuPlat-errorHint' }, v.hint) : null
      )
    )
  );
  const waits = ok ? p.waits : null;
  return [
    verdict,
    ...notes.map(n => h('div', { class: 'jp-GpuPlat-noGpu', role: 'note' }, n)),
    ...(waits
      ? [
          h(
            'div',
            { class: 'jp-GpuPlat-willWait', role: 'note', 'data-reason': waits.reason },
            `will wait: ${waits.message}, position ${waits.position}`
          )
        ]
      : []),
    ...estimateParts(p, use),
    // the flavor admission would choose if it were sent now (the service's answer)
    ...(ok && p.flavor ? [h('div', { class: 'jp-GpuPlat-muted jp-GpuPlat-previewFlavor' }, `Starts now on flavor ${p.flavor}`)] : []),
    h(
      'div',
      { class: 'jp-GpuPlat-muted jp-GpuPlat-workingDir' },
      p.working_dir ? `Runs in ${p.working_dir}` : "Runs in the run's own artifact directory"
    ),
    h('div', { class: 'jp-GpuPlat-muted' }, `Layers, weakest first: ${p.layers.join(' < ')}`),
    configTable(configRows(p.resolved, p.provenance))
  ];
}

/**
 * `would start: starts in ~12 min (p90 40 min)` and the sooner ways, each with its estimate and, where
 * the form can make its change, a button that does (`use`).
 */
function estimateParts(p: IPreview, use?: (change: FormChange) => void): HTMLElement[] {
  const e = previewEstimate(p);
  if (!e) {
    return [];
  }
  const line = h('div', { class: 'jp-GpuPlat-previewEta', role: 'note', title: e.why }, e.line);
  if (!e.sooner.length) {
    return [line];
  }
  const items = e.sooner.map(a => {
    const form = a.form;
    return h(
      'li',
      { class: 'jp-GpuPlat-sooner', title: a.why },
      h('span', { class: 'jp-GpuPlat-soonerHint' }, a.hint),
      h('span', { class: 'jp-GpuPlat-soonerEta' }, `: ${a.eta}`),
      use && form
        ? h('button', { class: 'jp-GpuPlat-button jp-GpuPlat-soonerUse', type: 'button', title: `Change the form: ${a.hint}`, onclick: () => use(form) }, 'Use')
        : null
    );
  });
  return [line, h('div', { class: 'jp-GpuPlat-soonerList' }, h('div', { class: 'jp-GpuPlat-muted' }, 'Sooner:'), h('ul', null, ...items))];
}
