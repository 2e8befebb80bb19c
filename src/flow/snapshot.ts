import * as schemas from '../contract/generated/walletSchemas.js'
import { validate } from '../contract/validate.js'
import { PayError } from '../errors/PayError.js'
import type { FlowSnapshot } from './snapshotSchema.js'
import { assertOneDecimalsPerAsset } from './validateOptions.js'

// The format itself is the zod schema in snapshotSchema.ts; this side checks with its generated JSON Schema.
export type { FlowSnapshot } from './snapshotSchema.js'

export const snapshotVersion = schemas.FlowSnapshot.properties.version.const

const needsActions: readonly string[] = ['signing', 'confirming', 'polling']

/** Validates a stored snapshot, including that its parts agree with its state. */
export function parseFlowSnapshot(value: unknown): FlowSnapshot {
  const parsed = validate(schemas.FlowSnapshot, value)
  if (!parsed.ok) {
    throw new PayError({
      code: 'invalid_snapshot',
      message: 'The snapshot does not match the snapshot format.',
      context: { issues: parsed.issues.slice(0, 5) },
    })
  }
  const snapshot = parsed.value as FlowSnapshot
  const { state, option, actions, results } = snapshot
  const actionCount = actions?.length ?? 0
  if (
    (needsActions.includes(state) && (!option || !actions)) ||
    results.length > actionCount ||
    ((state === 'confirming' || state === 'polling') && results.length !== actionCount) ||
    ((state === 'fetchingActions' || state === 'collectingData') && !option)
  ) {
    throw new PayError({
      code: 'invalid_snapshot',
      message: `The snapshot's parts do not fit its state (${state}).`,
    })
  }
  // A fresh options answer could not show one asset with two decimals; nor may a stored one.
  assertOneDecimalsPerAsset(option ? [...snapshot.options, option] : snapshot.options, 'invalid_snapshot')
  return snapshot
}
