import { describe, expect, it } from 'vitest'
import type { SignatureStatus, SignerRequest } from '../actions/types.js'
import { PayError } from '../errors/PayError.js'
import { resumePaymentFlow } from './createPaymentFlow.js'
import { attest, code, coversTransitions, processing, ready, setup } from './flowHarness.js'
import type { FlowSnapshot } from './snapshot.js'
import {
  amount,
  build,
  evmAccount,
  evmAddress,
  evmSigner,
  option,
  rpc,
  scriptedGateway,
  solChain,
  usdcBase,
} from './testkit.js'

describe('rebuilds after quote_expired', () => {
  it('builds and signs again when the quote expired before confirm, then confirms the new results', async () => {
    let confirms = 0
    let builds = 0
    const { flow, gateway, states } = setup({
      gateway: {
        fetchActions: async () => {
          builds += 1
          return {
            actions: [attest, rpc(solChain, 'solana_signTransaction', [{ transaction: `AQI${builds}` }])],
          }
        },
        confirm: async () => {
          confirms += 1
          if (confirms === 1)
            throw new PayError({ code: 'quote_expired', message: 'Blockhash expired.', status: 422 })
          return processing
        },
      },
    })
    await ready(flow, 'opt_mixed')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
    expect(gateway.callsTo('fetchActions')).toHaveLength(2)
    const [first, second] = gateway.callsTo('confirm')
    expect(first![1]).not.toEqual(second![1])
    // A different body needs a different idempotency key, or the service would refuse it as a conflict.
    expect((first![2] as { idempotencyKey: string }).idempotencyKey).not.toBe(
      (second![2] as { idempotencyKey: string }).idempotencyKey,
    )
    expect(states()).toContain('fetchingActions')
  })

  it('does not rebuild an option whose wallet already broadcast, nor loop forever', async () => {
    const expired = async () => {
      throw new PayError({ code: 'quote_expired', message: 'Quote expired.', status: 422 })
    }
    const { flow, gateway } = setup({ gateway: { confirm: expired } })
    await ready(flow, 'opt_mixed')
    await expect(flow.execute()).rejects.toThrowError(code('quote_expired'))
    expect(gateway.callsTo('fetchActions')).toHaveLength(3)
    const sent = option({
      id: 'opt_send',
      actions: [
        rpc('eip155:8453', 'eth_sendTransaction', [{ from: evmAddress, to: evmAddress, value: '0x0' }]),
      ],
    })
    const other = setup({ options: [sent], gateway: { confirm: expired } })
    await ready(other.flow, 'opt_send')
    await expect(other.flow.execute()).rejects.toThrowError(code('quote_expired'))
    expect(other.gateway.callsTo('confirm')).toHaveLength(1)
  })
})

describe('the exposure ledger', () => {
  const usdc = `caip19/${usdcBase}`
  const authorization = (n: number) => rpc('eip155:8453', 'eth_signTypedData_v4', [evmAddress, `auth ${n}`])
  const quoteExpired = () =>
    Promise.reject(new PayError({ code: 'quote_expired', message: 'x', status: 422 }))

  /** A 1 USDC option built by the gateway into one authorization for the full amount per round. */
  function ledgerSetup(
    status: ((request: SignerRequest, result: string) => Promise<SignatureStatus>) | undefined,
  ) {
    const evm = evmSigner({
      inspect: () => ({ account: evmAccount, transfers: [{ asset: usdcBase, amount: 1_000_000n }] }),
    })
    const asked: [string, string][] = []
    if (status) {
      evm.signatureStatus = (request, result) => {
        asked.push([request.params[1] as string, result])
        return status(request, result)
      }
    }
    let round = 0
    let confirms = 0
    const opt = option({ id: 'opt_built', amount: amount(usdc, '1000000'), actions: [build('b')] })
    const run = setup({
      options: [opt],
      signers: [evm],
      gateway: {
        fetchActions: async () => ({ actions: [authorization(++round)] }),
        confirm: () => (++confirms === 1 ? quoteExpired() : Promise.resolve(processing)),
      },
    })
    return { ...run, evm, asked }
  }

  it('an earlier signature proved spent: nothing more is signed, the flow polls the payment to its end', async () => {
    const { flow, evm, gateway, asked, states } = ledgerSetup(async () => 'spent')
    await ready(flow, 'opt_built')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
    expect(evm.requests).toHaveLength(1)
    expect(gateway.callsTo('fetchActions')).toHaveLength(1)
    expect(gateway.callsTo('confirm')).toHaveLength(1)
    expect(asked).toEqual([['auth 1', 'eth_signTypedData_v4#1']])
    expect(states().slice(-3)).toEqual(['confirming', 'polling', 'succeeded'])
    expect(flow.snapshot().exposure).toEqual([{ action: authorization(1), result: 'eth_signTypedData_v4#1' }])
  })

  it('proved dead by the node: the rebuild is signed and confirmed', async () => {
    const { flow, evm, gateway } = ledgerSetup(async () => 'dead')
    await ready(flow, 'opt_built')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
    expect(evm.requests).toHaveLength(2)
    expect(gateway.callsTo('confirm')[1]![1]).toEqual({
      optionId: 'opt_built',
      results: ['eth_signTypedData_v4#2'],
    })
  })

  type StatusReader = ((request: SignerRequest, result: string) => Promise<SignatureStatus>) | undefined
  it.each<[string, StatusReader]>([
    ['live', async () => 'live'],
    ['unreadable (the node failed)', () => Promise.reject(new Error('node down'))],
    ['not a status', async () => 'gone' as SignatureStatus],
    ['without the capability', undefined],
  ])('%s: it counts, so a full-amount rebuild is not signed', async (_, status) => {
    const { flow, evm } = ledgerSetup(status)
    await ready(flow, 'opt_built')
    await expect(flow.execute()).rejects.toThrowError(code('quote_expired'))
    expect(evm.requests).toHaveLength(1)
  })

  it('resume keeps the ledger: a signature spent after the rebuild was decided stops the next round', async () => {
    let answer: SignatureStatus = 'dead'
    const { flow, evm } = ledgerSetup(async () => answer)
    let kept: FlowSnapshot | undefined
    flow.on('snapshot', (s) => {
      if (s.state === 'fetchingActions' && s.exposure?.length) kept ??= s
    })
    await ready(flow, 'opt_built')
    await flow.execute()
    expect(kept!.exposure).toHaveLength(1)

    answer = 'spent'
    const again = evmSigner({
      inspect: () => ({ account: evmAccount, transfers: [{ asset: usdcBase, amount: 1_000_000n }] }),
    })
    again.signatureStatus = async () => answer
    const gateway = scriptedGateway({ fetchActions: async () => ({ actions: [authorization(9)] }) })
    const resumed = resumePaymentFlow(kept, { gateway, signers: [again] })
    resumed.on('error', () => {})
    await expect(resumed.execute()).rejects.toMatchObject({
      code: 'action_rejected',
      shortMessage: 'An earlier signature paid this option.',
    })
    expect(again.requests).toEqual([])
    expect(evm.requests).toHaveLength(2)
  })
})

coversTransitions('exposure')
