/**
 * A notebook's kernel as the session follower sees it: which session kernelspec it is on (or
 * starting, or prefers), holding JupyterLab's own kernel start, and one start at a time.
 */

import type { ISessionContext } from '@jupyterlab/apputils';

import type { ISessionSpec } from '../../models/sessionmodel';

export const STARTING = new Set(['starting', 'initializing', 'restarting']);

export class KernelGate {
  /** `sc`: the notebook's session context; `specs`: the session kernelspecs offered now; `name`: for warnings. */
  constructor(
    private _sc: () => ISessionContext,
    private _specs: () => ISessionSpec[],
    private _name: () => string
  ) {}

  /** Whether JupyterLab's own start is held (`hold`). */
  get held(): boolean {
    return this._held;
  }

  /** The session kernelspec the notebook is on, or is starting, or prefers; null if none. */
  specName(): string | null {
    const specs = this._specs();
    const names = new Set(specs.map(s => s.name));
    const sc = this._sc();
    const kernel = sc.session?.kernel;
    if (kernel) {
      return names.has(kernel.name) ? kernel.name : null;
    }
    if (STARTING.has(sc.kernelDisplayStatus)) {
      const pending = specs.find(s => s.displayName === sc.kernelDisplayName);
      if (pending) {
        return pending.name;
      }
    }
    const preferred = sc.kernelPreference.name;
    return preferred && names.has(preferred) ? preferred : null;
  }

  kernelState(): { hasKernel: boolean; starting: boolean } {
    const sc = this._sc();
    return { hasKernel: !!sc.session?.kernel, starting: STARTING.has(sc.kernelDisplayStatus) };
  }

  /**
   * One kernel start at a time from here: JupyterLab shuts down the session of a start another
   * one pre-empted, and shutting a session kernel down ends its lease (KernelShutdown), which
   * the kernel of the other start shares.
   */
  start(name: string): void {
    if (this._startInFlight) {
      return;
    }
    this._startInFlight = true;
    this._sc()
      .changeKernel({ name })
      .catch(error => console.warn(`gpuplat: ${this._name()}: kernel start failed`, error))
      .finally(() => (this._startInFlight = false));
  }

  /** JupyterLab starts no kernel for this notebook by itself (restored, or a cell run with none). */
  hold(): void {
    const sc = this._sc();
    if (!this._held) {
      this._saved = { shouldStart: sc.kernelPreference.shouldStart, autoStartDefault: sc.kernelPreference.autoStartDefault };
      this._held = true;
    }
    sc.kernelPreference = { ...sc.kernelPreference, shouldStart: false, autoStartDefault: false };
  }

  /** JupyterLab's own start as it was before `hold`. */
  release(): void {
    if (!this._held) {
      return;
    }
    this._held = false;
    const sc = this._sc();
    sc.kernelPreference = { ...sc.kernelPreference, ...this._saved };
  }

  private _held = false;
  private _saved: { shouldStart?: boolean; autoStartDefault?: boolean } = {};
  private _startInFlight = false;
}
