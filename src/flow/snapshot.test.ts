import { describe, expect, it } from 'vitest'
import { parseFlowSnapshot } from './snapshot.js'
import { amount, evmAccount, option, usdcBase } from './testkit.js'

const snapshot = (options: ReturnType<typeof option>[]) => ({
  version: 1,
  flowId: 'flow_snapshot_test',
  paymentId: 'pay_1',
  state: 'selecting',
  accounts: [evmAccount],
  options,
  collectData: null,
  option: null,
  collectDataCompleted: null,
  actions: null,
  results: [],
  inFlight: null,
  pollInMs: null,
  result: null,
})

describe('parseFlowSnapshot and the canonical asset identity', () => {
  it('refuses options that show one asset, in two spellings, with two decimals (cause 1)', () => {
    const six = option({ id: 'a' })
    const twelve = option({
      id: 'b',
      amount: {
        ...amount(`caip19/${usdcBase.toLowerCase()}`, '1000000000000'),
        display: { ...six.amount.display, decimals: 12 },
      },
    })
    expect(parseFlowSnapshot(snapshot([six]))).toMatchObject({ options: [six] })
    expect(() => parseFlowSnapshot(snapshot([six, twelve]))).toThrowError(
      expect.objectContaining({ code: 'invalid_snapshot' }),
    )
  })
})
