import { type ApiVersion, apiVersions } from '../contract/errors.js'
import { fail } from './errors.js'

const versionPattern = /^\d{4}-\d{2}-\d{2}(\.[a-z]+)?$/

/**
 * The version a request is served with: `Pay-Version` when sent, else the partner's pinned one.
 * A preview is used only when sent explicitly; going below the pinned version is refused.
 */
export function resolveApiVersion(requested: string | undefined, pinned: ApiVersion): ApiVersion {
  if (requested === undefined) return pinned
  if (!versionPattern.test(requested)) {
    fail('invalid_api_version', 'Pay-Version must look like 2026-02-18.', { version: requested })
  }
  const index = (apiVersions as readonly string[]).indexOf(requested)
  if (index === -1) {
    fail('unknown_api_version', `Unknown API version ${requested}.`, { known: [...apiVersions] })
  }
  if (index < apiVersions.indexOf(pinned)) {
    fail('api_version_downgrade', `Pay-Version ${requested} is older than the account's version ${pinned}.`)
  }
  return requested as ApiVersion
}

export function isPreview(version: ApiVersion): boolean {
  return version.endsWith('.preview')
}
