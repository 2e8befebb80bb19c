import { describe, expect, it, vi } from 'vitest'
import type { SignerRequest } from '../../src/actions/types.js'
import { PayError } from '../../src/errors/PayError.js'
import { expectPayError } from '../../test/expectPayError.js'
import type { WalletConnectRequestParams, WalletConnectSession } from './types.js'
import { walletConnectSigner, walletConnectSigners } from './walletConnectSigner.js'

const topic = 'a'.repeat(64)
const address = '0x00000000000000000000000000000000000000aa'
const solanaChain = 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp'
const solanaAddress = 'BuyerBuyerBuyerBuyerBuyerBuyerBuyerBuyer111'

function session(overrides: Partial<WalletConnectSession> = {}): WalletConnectSession {
  return {
    topic,
    expiry: Math.floor(Date.now() / 1000) + 3600,
    namespaces: {
      eip155: {
        chains: ['eip155:1'],
        accounts: [`eip155:1:${address}`],
        methods: ['personal_sign', 'eth_sendTransaction'],
        events: [],
      },
      // CAIP-25 allows a chain as key; then `chains` may be omitted and methods are that chain's.
      'eip155:10': { accounts: [`eip155:10:${address}`], methods: ['eth_signTypedData_v4'], events: [] },
      solana: {
        accounts: [`${solanaChain}:${solanaAddress}`],
        methods: ['solana_signTransaction'],
        events: [],
      },
    },
    ...overrides,
  }
}

type Answer = (params: WalletConnectRequestParams) => Promise<unknown>

/** A dapp-side client double. Requests fail unless the test says how the wallet answers. */
function fakeClient(initial: WalletConnectSession | undefined = session(), answer?: Answer) {
  let current: WalletConnectSession | undefined = initial
  const calls: WalletConnectRequestParams[] = []
  return {
    calls,
    replaceSession(next: WalletConnectSession | undefined) {
      current = next
    },
    session: {
      get(key: string): WalletConnectSession {
        const found = current
        if (!found || found.topic !== key) throw new Error(`No matching key. session: ${key}`)
        return found
      },
    },
    async request<T>(params: WalletConnectRequestParams): Promise<T> {
      calls.push(params)
      if (!answer) throw new Error('the test double got an unexpected request')
      return (await answer(params)) as T
    },
  }
}

/** Decodes nothing but the signing account: these tests are about forwarding, not decoding. */
const ownAccount = (request: SignerRequest) => ({
  account: `${request.chainId}:${request.chainId.startsWith('solana') ? solanaAddress : address}`,
  transfers: [],
})

const personalSign: SignerRequest = {
  chainId: 'eip155:1',
  method: 'personal_sign',
  params: ['0x68690a', address],
}

describe('walletConnectSigner: what the session approved', () => {
  it('merges accounts, methods and chains over namespace and chain keys', () => {
    const signer = walletConnectSigner({
      inspect: ownAccount,
      client: fakeClient(),
      session: session(),
      namespace: 'eip155',
    })
    expect(signer.topic).toBe(topic)
    expect(signer.accounts()).toEqual([`eip155:1:${address}`, `eip155:10:${address}`])
    expect(signer.methods).toEqual(['personal_sign', 'eth_sendTransaction', 'eth_signTypedData_v4'])
    expect(signer.chains()).toEqual(['eip155:1', 'eip155:10'])
  })

  it('derives chains from the accounts when a namespace key omits them', () => {
    const signer = walletConnectSigner({
      inspect: ownAccount,
      client: fakeClient(),
      topic,
      namespace: 'solana',
    })
    expect(signer.chains()).toEqual([solanaChain])
  })

  it('follows the live session: updates are seen, a deleted or expired session has no accounts', () => {
    const client = fakeClient()
    const signer = walletConnectSigner({ inspect: ownAccount, client, topic, namespace: 'solana' })
    client.replaceSession(
      session({ namespaces: { solana: { accounts: [`${solanaChain}:Other111`], methods: [], events: [] } } }),
    )
    expect(signer.accounts()).toEqual([`${solanaChain}:Other111`])
    client.replaceSession(session({ expiry: Math.floor(Date.now() / 1000) - 1 }))
    expect(signer.accounts()).toEqual([])
    client.replaceSession(undefined)
    expect(signer.accounts()).toEqual([])
    expect(signer.methods).toEqual([])
  })

  it('refuses to build a signer for an unknown topic or an unapproved namespace', () => {
    const unknown = () =>
      walletConnectSigner({
        inspect: ownAccount,
        client: fakeClient(),
        topic: 'b'.repeat(64),
        namespace: 'eip155',
      })
    expect(unknown).toThrow(expect.objectContaining({ code: 'missing_signer' }))
    const cosmos = () =>
      walletConnectSigner({ inspect: ownAccount, client: fakeClient(), topic, namespace: 'cosmos' })
    expect(cosmos).toThrow(
      expect.objectContaining({
        code: 'missing_signer',
        context: expect.objectContaining({ approved: ['eip155', 'solana'] }),
      }),
    )
  })
})

describe('walletConnectSigner: request', () => {
  it('forwards the action to the session with the wallet deadline', async () => {
    const client = fakeClient(session(), async () => '0xsig')
    const signer = walletConnectSigner({ inspect: ownAccount, client, topic, namespace: 'eip155' })
    await expect(signer.request(personalSign)).resolves.toBe('0xsig')
    expect(client.calls).toEqual([
      {
        topic,
        chainId: 'eip155:1',
        request: { method: 'personal_sign', params: ['0x68690a', address] },
        expiry: 301,
      },
    ])
  })

  it('keeps the wallet deadline within what sign-client accepts', async () => {
    const client = fakeClient(session(), async () => '0xsig')
    await walletConnectSigner({
      inspect: ownAccount,
      client,
      topic,
      namespace: 'eip155',
      requestTimeoutMs: 1000,
    }).request(personalSign)
    await walletConnectSigner({
      inspect: ownAccount,
      client,
      topic,
      namespace: 'eip155',
      requestTimeoutMs: 30 * 86_400_000,
    }).request(personalSign)
    expect(client.calls.map((c) => c.expiry)).toEqual([300, 604_800])
  })

  it('sends nothing for a chain, namespace or per-chain method the session did not approve', async () => {
    const client = fakeClient()
    const signer = walletConnectSigner({ inspect: ownAccount, client, topic, namespace: 'eip155' })
    const chain = await expectPayError(signer.request({ ...personalSign, chainId: 'eip155:8453' }))
    expect(chain.code).toBe('action_rejected')
    expect(chain.context.approvedChains).toEqual(['eip155:1', 'eip155:10'])
    const otherNamespace = await expectPayError(signer.request({ ...personalSign, chainId: solanaChain }))
    expect(otherNamespace.code).toBe('action_rejected')
    // personal_sign is approved on eip155:1 only.
    const method = await expectPayError(signer.request({ ...personalSign, chainId: 'eip155:10' }))
    expect(method.code).toBe('unsupported_method')
    expect(method.context.approvedMethods).toEqual(['eth_signTypedData_v4'])
    expect(client.calls).toEqual([])
  })

  it('fails with signer_failed once the session is gone or expired', async () => {
    const client = fakeClient()
    const signer = walletConnectSigner({ inspect: ownAccount, client, topic, namespace: 'eip155' })
    client.replaceSession(session({ expiry: Math.floor(Date.now() / 1000) - 1 }))
    expect((await expectPayError(signer.request(personalSign))).code).toBe('signer_failed')
    client.replaceSession(undefined)
    expect((await expectPayError(signer.request(personalSign))).code).toBe('signer_failed')
    expect(client.calls).toEqual([])
  })
})

describe('walletConnectSigner: Solana shapes', () => {
  const request: SignerRequest = {
    chainId: solanaChain,
    method: 'solana_signTransaction',
    params: [{ transaction: 'AQID' }],
  }

  it('sends WalletConnect the `{transaction}` object, not caipay’s one-element array', async () => {
    const client = fakeClient(session(), async () => 'c2lnbmVk')
    await walletConnectSigner({ inspect: ownAccount, client, topic, namespace: 'solana' }).request(request)
    expect(client.calls[0]?.request).toEqual({
      method: 'solana_signTransaction',
      params: { transaction: 'AQID' },
    })
  })

  it.each([
    ['a base64 string', 'c2lnbmVk'],
    ['{ transaction }', { transaction: 'c2lnbmVk' }],
    ['{ signature, transaction }', { signature: '5sig', transaction: 'c2lnbmVk' }],
  ])('accepts %s as the signed transaction', async (_, answer) => {
    const signer = walletConnectSigner({
      inspect: ownAccount,
      client: fakeClient(session(), async () => answer),
      topic,
      namespace: 'solana',
    })
    await expect(signer.request(request)).resolves.toBe('c2lnbmVk')
  })

  it('refuses a detached signature', async () => {
    const client = fakeClient(session(), async () => ({ signature: '5sig' }))
    const error = await expectPayError(
      walletConnectSigner({ inspect: ownAccount, client, topic, namespace: 'solana' }).request(request),
    )
    expect(error.code).toBe('action_rejected')
    expect(error.shortMessage).toContain('complete signed transaction')
  })

  it.each([
    ['an empty string', ''],
    ['null', null],
    ['an object', { ok: true }],
  ])('refuses %s as a result', async (_, answer) => {
    const client = fakeClient(session(), async () => answer)
    const error = await expectPayError(
      walletConnectSigner({ inspect: ownAccount, client, topic, namespace: 'solana' }).request(request),
    )
    expect(error.code).toBe('action_rejected')
  })
})

describe('walletConnectSigner: wallet errors', () => {
  it.each([4001, 5000, 5001, 5002, 5003])('maps code %i to user_rejected', async (code) => {
    const client = fakeClient(session(), () => Promise.reject({ code, message: 'User rejected.' }))
    const error = await expectPayError(
      walletConnectSigner({ inspect: ownAccount, client, topic, namespace: 'eip155' }).request(personalSign),
    )
    expect(error.code).toBe('user_rejected')
    expect(error.context).toEqual({ chainId: 'eip155:1', method: 'personal_sign', topic, rpcCode: code })
    expect(error.cause).toEqual({ code, message: 'User rejected.' })
  })

  it.each([4200, 5101])('maps code %i to unsupported_method', async (code) => {
    const client = fakeClient(session(), () => Promise.reject({ code, message: 'Unsupported methods.' }))
    const error = await expectPayError(
      walletConnectSigner({ inspect: ownAccount, client, topic, namespace: 'eip155' }).request(personalSign),
    )
    expect(error.code).toBe('unsupported_method')
  })

  it('maps any other error to action_rejected with its code and message', async () => {
    const client = fakeClient(session(), () =>
      Promise.reject({ code: -32000, message: 'insufficient funds' }),
    )
    const signer = walletConnectSigner({ inspect: ownAccount, client, topic, namespace: 'eip155' })
    const coded = await expectPayError(signer.request(personalSign))
    expect(coded.code).toBe('action_rejected')
    expect(coded.context.rpcCode).toBe(-32000)
    expect(coded.details).toBe('insufficient funds')

    const relayDown = fakeClient(session(), () => Promise.reject(new Error('Failed to publish payload')))
    const uncoded = await expectPayError(
      walletConnectSigner({ inspect: ownAccount, client: relayDown, topic, namespace: 'eip155' }).request(
        personalSign,
      ),
    )
    expect(uncoded.code).toBe('action_rejected')
    expect(uncoded.context.rpcCode).toBeUndefined()
    expect(uncoded.details).toBe('Failed to publish payload')
  })
})

describe('walletConnectSigner: abort and timeout', () => {
  it('sends nothing when the signal is already aborted', async () => {
    const client = fakeClient()
    const signal = AbortSignal.abort()
    const error = await expectPayError(
      walletConnectSigner({ inspect: ownAccount, client, topic, namespace: 'eip155' }).request({
        ...personalSign,
        signal,
      }),
    )
    expect(error.code).toBe('aborted')
    expect(client.calls).toEqual([])
  })

  it('stops waiting on abort and drops the late answer', async () => {
    let answerLate!: (value: unknown) => void
    const client = fakeClient(session(), () => new Promise((_, reject) => (answerLate = reject)))
    const controller = new AbortController()
    const pending = walletConnectSigner({ inspect: ownAccount, client, topic, namespace: 'eip155' }).request({
      ...personalSign,
      signal: controller.signal,
    })
    await vi.waitFor(() => expect(client.calls).toHaveLength(1))
    controller.abort(new Error('user left'))
    const error = await expectPayError(pending)
    expect(error.code).toBe('aborted')
    expect(error.context.sent).toBe(true)
    answerLate({ code: 4001, message: 'too late' })
  })

  it('refuses a timeout that is not a positive number of milliseconds', () => {
    for (const requestTimeoutMs of [0, -1, Number.NaN]) {
      expect(() =>
        walletConnectSigner({
          inspect: ownAccount,
          client: fakeClient(),
          topic,
          namespace: 'eip155',
          requestTimeoutMs,
        }),
      ).toThrow(expect.objectContaining({ code: 'invalid_signer' }))
    }
  })

  it('caps a very long timeout at the wallet deadline instead of overflowing the timer', async () => {
    vi.useFakeTimers()
    try {
      const silent = fakeClient(session(), () => new Promise(() => {}))
      const signer = walletConnectSigner({
        inspect: ownAccount,
        client: silent,
        topic,
        namespace: 'eip155',
        requestTimeoutMs: 30 * 86_400_000,
      })
      const pending = expectPayError(signer.request(personalSign))
      await vi.advanceTimersByTimeAsync(7 * 86_400_000 - 1)
      expect(vi.getTimerCount()).toBe(1)
      await vi.advanceTimersByTimeAsync(1)
      const error = await pending
      expect(error.context.timeoutMs).toBe(7 * 86_400_000)
    } finally {
      vi.useRealTimers()
    }
  })

  it('gives up after requestTimeoutMs: signer_failed, or action_in_doubt for a transaction', async () => {
    const silent = fakeClient(session(), () => new Promise(() => {}))
    const signer = walletConnectSigner({
      inspect: ownAccount,
      client: silent,
      topic,
      namespace: 'eip155',
      requestTimeoutMs: 20,
    })
    const signature = await expectPayError(signer.request(personalSign))
    expect(signature.code).toBe('signer_failed')
    expect(signature.context.timeoutMs).toBe(20)
    const send = await expectPayError(
      signer.request({ chainId: 'eip155:1', method: 'eth_sendTransaction', params: [{ from: address }] }),
    )
    expect(send.code).toBe('action_in_doubt')
  })
})

describe('inspect and walletConnectSigners', () => {
  it('forwards nothing without a decoder, and decodes before forwarding', async () => {
    const client = fakeClient(session(), async () => '0xsig')
    const plain = walletConnectSigner({ client, topic, namespace: 'eip155' })
    expect('inspect' in plain).toBe(false)
    await expectPayError(plain.request(personalSign), 'action_rejected')
    const refusing = walletConnectSigner({
      client,
      topic,
      namespace: 'eip155',
      inspect: () => {
        throw new PayError({ code: 'action_rejected', message: 'no' })
      },
    })
    await expectPayError(refusing.request(personalSign), 'action_rejected')
    const foreign = walletConnectSigner({
      client,
      topic,
      namespace: 'eip155',
      inspect: () => ({ account: 'eip155:1:0x00000000000000000000000000000000000000bb', transfers: [] }),
    })
    await expectPayError(foreign.request(personalSign), 'action_rejected')
    expect(client.calls).toHaveLength(0)

    const inspection = { account: `eip155:1:${address}`, transfers: [] }
    const inspect = vi.fn(() => inspection)
    const signer = walletConnectSigner({ client, topic, namespace: 'eip155', inspect })
    expect(await signer.inspect?.(personalSign)).toBe(inspection)
    expect(inspect).toHaveBeenCalledWith(personalSign)
    await signer.request(personalSign)
    expect(inspect).toHaveBeenCalledTimes(2)
    expect(client.calls).toHaveLength(1)
  })

  it('forwards the params rebuilt from the decoded fields, and only `transaction` for Solana', async () => {
    const client = fakeClient(session(), async () => 'AQID')
    const signer = walletConnectSigner({
      client,
      topic,
      namespace: 'eip155',
      inspect: ownAccount,
      forwardParams: () => ['0x6869', address],
    })
    await signer.request({ ...personalSign, params: ['0x6869', address, { extra: true }] })
    expect(client.calls[0]!.request.params).toEqual(['0x6869', address])
    const solana = walletConnectSigner({ client, topic, namespace: 'solana', inspect: ownAccount })
    await solana.request({
      chainId: solanaChain,
      method: 'solana_signTransaction',
      params: [{ transaction: 'AQID', pubkey: 'Other111' }],
    })
    expect(client.calls[1]!.request.params).toEqual({ transaction: 'AQID' })
  })

  it('builds one signer per approved namespace, with decoders by namespace', async () => {
    const inspect = vi.fn(() => ({ account: `${solanaChain}:${solanaAddress}`, transfers: [] }))
    const signers = walletConnectSigners(fakeClient(), topic, { inspect: { solana: inspect } })
    expect(signers.map((s) => s.namespace)).toEqual(['eip155', 'solana'])
    expect('inspect' in signers[0]!).toBe(false)
    expect(signers[1]!.inspect).toBe(inspect)
    expect(walletConnectSigners(fakeClient(), session()).map((s) => s.topic)).toEqual([topic, topic])
    expect(() => walletConnectSigners(fakeClient(), 'c'.repeat(64))).toThrow(
      expect.objectContaining({ code: 'missing_signer' }),
    )
  })

  it('exports exactly the public API', async () => {
    expect(Object.keys(await import('./index.js')).sort()).toEqual([
      'walletConnectSigner',
      'walletConnectSigners',
    ])
  })
})
