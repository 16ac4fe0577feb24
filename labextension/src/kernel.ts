/**
 * Code the panel runs in a notebook's kernel (`%memory check`, `%%remember --output-of`):
 * run it out of the notebook's history, and word what went wrong.
 */

import { Kernel, KernelMessage } from '@jupyterlab/services';
import { TranslationBundle } from '@jupyterlab/translation';

/** What a piece of code run in a kernel for the panel printed, and how it ended. */
export interface IKernelRun {
  ok: boolean;
  /** Its printed and displayed text (text/plain), trimmed. */
  text: string;
  /** `Name: message` of the error it raised, or ''. */
  error: string;
  ename: string;
}

/**
 * Run `code` in a notebook's kernel, for the panel: not stored in the kernel's history
 * (no `In[n]`, the cells' numbering stays), its output kept here and not in the notebook.
 */
export async function runInKernel(
  kernel: Kernel.IKernelConnection,
  code: string
): Promise<IKernelRun> {
  const future = kernel.requestExecute({
    code,
    silent: false,
    store_history: false,
    allow_stdin: false,
    stop_on_error: false
  });
  const texts: string[] = [];
  let error = '';
  let ename = '';
  future.onIOPub = (msg: KernelMessage.IIOPubMessage) => {
    const content = msg.content as any;
    switch (msg.header.msg_type) {
      case 'stream':
        texts.push(String(content.text));
        break;
      case 'display_data':
      case 'execute_result': {
        const plain = content.data?.['text/plain'];
        if (typeof plain === 'string') {
          texts.push(plain + '\n');
        }
        break;
      }
      case 'error':
        ename = String(content.ename);
        error = `${content.ename}: ${content.evalue}`;
        break;
    }
  };
  const reply = await future.done;
  return { ok: reply.content.status === 'ok', text: texts.join('').trim(), error, ename };
}

/**
 * A kernel's error in words to act on: nbmemory's magics absent is said in full (short:
 * a notification shows about 140 characters), else `failed(why)` words the error.
 */
export function kernelProblem(
  run: IKernelRun,
  path: string,
  failed: (why: string) => string,
  trans: TranslationBundle
): string {
  // IPython prints a missing magic's UsageError (no error message on iopub).
  const said = `${run.error}\n${run.text}`;
  // IPython 8 says "Cell magic function `%%remember` not found", IPython 9 without "function".
  if (/UsageError: (Line|Cell) magic (function )?.* not found/i.test(said)) {
    return trans.__(
      'nbmemory is not loaded in the kernel of %1: run %load_ext nbmemory there.',
      path
    );
  }
  return failed(run.error || run.text || trans.__('the kernel reported an error'));
}
