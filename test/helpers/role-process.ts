import { spawn } from 'node:child_process';
import { inject } from 'vitest';

/**
 * `main.ts <roles…>` as a child process with its stdout and stderr kept line by line (the log lines a
 * collector would read). Resolves once `ready` appears in the output.
 */
export async function startRoleProcess(roles: string[], env: Record<string, string>, ready: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'main.ts', ...roles], {
    env: { ...process.env, SVC_WORKFLOW_BUNDLE: inject('workflowBundlePath'), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => {
      if (out.includes(ready)) {
        clearInterval(timer);
        resolve();
      }
    }, 50);
    void exited.then((code) => {
      clearInterval(timer);
      reject(new Error(`main.ts ${roles.join(' ')} exited (${code}):\n${out}`));
    });
  });
  return {
    output: () => out,
    lines: () => out.split('\n').filter((l) => l.trim() !== ''),
    /** SIGTERM, as an orchestrator stops it; resolves with its exit code once it has drained. */
    async stop(): Promise<number | null> {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}
