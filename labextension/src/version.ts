/**
 * The handshake: whether nbmemory's server extension is there and speaks this panel's
 * version, in words to act on when it does not.
 */

import { TranslationBundle } from '@jupyterlab/translation';

import { isUnreachable, messageOf, wordsOf } from './describe';
import { ApiError, requestAPI } from './request';
import { IVersion } from './types';

// The version of this frontend, compared with the server extension's.
import packageInfo from '../package.json';

export const FRONTEND_VERSION: string = packageInfo.version;

/** Whether the panel may talk to the server extension, and why not. */
export interface ICompatibility {
  ok: boolean;
  message: string;
}

/**
 * Ask the server extension its version; `cold` when no owner runs yet (the next request
 * starts one).
 */
export async function checkServer(
  trans: TranslationBundle
): Promise<{ compatibility: ICompatibility; cold: boolean }> {
  try {
    const server = await requestAPI<IVersion>('version');
    if (server.version !== FRONTEND_VERSION) {
      return {
        compatibility: {
          ok: false,
          message: trans.__(
            'The nbmemory server extension is version %1 but this panel is %2. Install one nbmemory version into the Jupyter server\'s environment (pip install -U nbmemory), then restart JupyterLab and reload this page.',
            server.version,
            FRONTEND_VERSION
          )
        },
        cold: false
      };
    }
    return { compatibility: { ok: true, message: '' }, cold: server.owner_running === false };
  } catch (error) {
    const status = error instanceof ApiError ? error.status : 0;
    return {
      compatibility: {
        ok: false,
        message:
          status === 404
            ? trans.__(
                "The nbmemory server extension is not running in this Jupyter server. Install nbmemory into the server's environment (pip install nbmemory), check it with `jupyter server extension list`, then restart JupyterLab."
              )
            : isUnreachable(error)
              ? wordsOf(error, trans)
              : trans.__('Cannot reach the nbmemory server extension: %1', messageOf(error))
      },
      cold: false
    };
  }
}
