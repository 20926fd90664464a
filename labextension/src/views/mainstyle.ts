/**
 * Styles of the main-area views (run tab, Compare tab, submit dialog's locks), added once.
 * They live here, not in style/ (the sidebar's), and only refine the shared classes where
 * the main area has room.
 */

const CSS = `
.jp-GpuPlat-runTab .jp-GpuPlat-detail, .jp-GpuPlat-compareTab .jp-GpuPlat-compareView {
  overflow: auto; padding: 8px 16px; box-sizing: border-box;
}
.jp-GpuPlat-runColumns { display: flex; gap: 24px; align-items: flex-start; }
.jp-GpuPlat-runColumns > div { flex: 1 1 0; min-width: 0; }
.jp-GpuPlat-runTab .jp-GpuPlat-logBody { height: 45vh; max-height: none; }
.jp-GpuPlat-runTab .jp-GpuPlat-metrics { display: grid; grid-template-columns: repeat(auto-fill, minmax(240px, 1fr)); gap: 8px; }
.jp-GpuPlat-compareView .jp-GpuPlat-toolbar { display: flex; align-items: center; gap: 8px; flex-wrap: wrap; }
.jp-GpuPlat-compareLegend { list-style: none; padding: 0; margin: 8px 0; display: flex; flex-direction: column; gap: 4px; }
.jp-GpuPlat-compareRun { display: flex; align-items: center; gap: 8px; flex-wrap: wrap; }
.jp-GpuPlat-swatch { display: inline-block; width: 14px; height: 4px; border-radius: 2px; }
.jp-GpuPlat-legendParams { font-family: var(--jp-code-font-family); color: var(--jp-ui-font-color1); }
.jp-GpuPlat-compareCharts { display: grid; grid-template-columns: repeat(auto-fill, minmax(320px, 1fr)); gap: 12px; margin: 8px 0 16px; }
.jp-GpuPlat-compareChart { width: 100%; height: 140px; background: var(--jp-layout-color2); }
.jp-GpuPlat-compareGrid { border-collapse: collapse; font-size: var(--jp-ui-font-size1); width: 100%; }
.jp-GpuPlat-compareGrid th, .jp-GpuPlat-compareGrid td {
  text-align: left; vertical-align: top; padding: 3px 12px 3px 4px;
  border-bottom: var(--jp-border-width) solid var(--jp-border-color3);
}
.jp-GpuPlat-compareGrid td { max-width: 40ch; white-space: pre-wrap; overflow-wrap: anywhere; }
.jp-GpuPlat-compareGrid .jp-GpuPlat-compareKey { font-family: var(--jp-code-font-family); white-space: nowrap; }
.jp-GpuPlat-compareGrid tr.jp-GpuPlat-differ td:first-child { border-left: 3px solid var(--jp-warn-color1); }
.jp-GpuPlat-compareGrid tr.jp-GpuPlat-codeDiffer td { max-width: none; }
.jp-GpuPlat-codeDiff summary { cursor: pointer; color: var(--jp-brand-color1); }
.jp-GpuPlat-codeDiff pre.jp-GpuPlat-diff { font-family: var(--jp-code-font-family); margin: 4px 0 0; max-height: 40ch; overflow: auto; white-space: pre; }
.jp-GpuPlat-compareSection td { font-weight: 600; color: var(--jp-ui-font-color2); padding-top: 10px; }
.jp-GpuPlat-delta.jp-mod-good { color: var(--jp-success-color1); }
.jp-GpuPlat-delta.jp-mod-bad { color: var(--jp-error-color1); }
.jp-GpuPlat-delta.jp-mod-neutral { color: var(--jp-ui-font-color2); }
.jp-GpuPlat-submitDialog select:disabled[data-locked], .jp-GpuPlat-submitDialog input:disabled[data-locked] {
  color: var(--jp-ui-font-color1); background: var(--jp-layout-color2); cursor: not-allowed;
}
.jp-GpuPlat-presetDefault { opacity: 0.9; }
.jp-GpuPlat-willWait { margin: 4px 0; padding: 4px 8px; border-left: 3px solid var(--jp-GpuPlat-queued, var(--jp-brand-color1)); background: var(--jp-layout-color2); }
.jp-GpuPlat-previewEta { margin: 4px 0; padding: 4px 8px; border-left: 3px solid var(--jp-GpuPlat-dispatch, var(--jp-brand-color1)); }
.jp-GpuPlat-soonerList { margin: 0 0 6px 11px; }
.jp-GpuPlat-soonerList ul { margin: 2px 0; padding-left: 16px; }
.jp-GpuPlat-sooner { margin: 2px 0; }
.jp-GpuPlat-soonerUse { margin-left: 8px; padding: 0 8px; }
.jp-GpuPlat-noGpu { margin: 4px 0; padding: 4px 8px; border-left: 3px solid var(--jp-warn-color1); background: var(--jp-layout-color2); }
.jp-GpuPlat-submitReason { flex: 1 1 auto; margin-right: 8px; color: var(--jp-error-color1); font-size: var(--jp-ui-font-size1); align-self: center; }
.jp-GpuPlat-submitReason[data-ok="true"] { display: none; }
`;

export function addMainAreaStyle(): void {
  if (document.getElementById('jp-GpuPlat-mainarea-style')) {
    return;
  }
  const style = document.createElement('style');
  style.id = 'jp-GpuPlat-mainarea-style';
  style.textContent = CSS;
  document.head.append(style);
}
