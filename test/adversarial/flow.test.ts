import {
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  TOKEN_PROGRAM_ID,
} from '@solana/spl-token'
import { Keypair, TransactionMessage, VersionedTransaction } from '@solana/web3.js'
import { toHex } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterEach, beforeEach, describe, expect, it, type MockInstance, vi } from 'vitest'
import { evmSigner } from '../../adapters/evm/index.js'
import { solanaSigner } from '../../adapters/solana/index.js'
import { isPayError } from '../../src/errors/PayError.js'
import { authorizationTypedData } from '../anvil.js'
import { countingAccount } from '../countingAccount.js'
import { gatewayError } from './hostileGateway.js'
import { option, payAgainst, paymentId, rpc, succeeded } from './support.js'

// Whole-flow attacks by a hostile gateway: options that lie about themselves (class 3 and the
// option checks), and confirm answers that ask the wallet to sign again (class 4), across mixed
// EVM and Solana options. Keys are real and every signing call is counted.

const base = 'eip155:8453'
const token = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'
const evmAsset = `${base}/erc20:${token}`
const sol = 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp'
const buyer = Keypair.generate()
const service = Keypair.generate()
const mint = Keypair.generate().publicKey
const solAsset = `${sol}/token:${mint.toBase58()}`
const solAccount = `${sol}:${buyer.publicKey.toBase58()}`
const merchant = privateKeyToAccount(generatePrivateKey()).address

let solanaSignCalls: MockInstance
beforeEach(() => {
  solanaSignCalls = vi.spyOn(VersionedTransaction.prototype, 'sign')
})
afterEach(() => solanaSignCalls.mockRestore())

function evmKey() {
  const counted = countingAccount(generatePrivateKey())
  // Signing typed data and messages needs no node; the URL is never reached.
  const signer = evmSigner({ account: counted.account, chains: { [base]: { rpcUrl: 'http://127.0.0.1:9' } } })
  return { ...counted, signer, caip10: `${base}:${counted.account.address}` }
}

function authorization(
  from: `0x${string}`,
  value: bigint,
  validBefore = BigInt(Math.floor(Date.now() / 1000) + 3600),
) {
  const data = authorizationTypedData({ token, chainId: 8453, from, to: merchant, value, validBefore })
  return rpc(base, 'eth_signTypedData_v4', [from, JSON.stringify(data)])
}

function solanaTransfer(amount: bigint): string {
  const ix = createTransferCheckedInstruction(
    getAssociatedTokenAddressSync(mint, buyer.publicKey),
    mint,
    getAssociatedTokenAddressSync(mint, service.publicKey),
    buyer.publicKey,
    amount,
    6,
    [],
    TOKEN_PROGRAM_ID,
  )
  const message = new TransactionMessage({
    payerKey: service.publicKey,
    recentBlockhash: Keypair.generate().publicKey.toBase58(),
    instructions: [ix],
  }).compileToLegacyMessage()
  return Buffer.from(new VersionedTransaction(message).serialize()).toString('base64')
}

const build = { type: 'build' as const, build: { data: 'opaque' } }

describe('a gateway that goes silent', () => {
  it('takes the status read and never answers: each read is cut at the time limit, and the flow ends at its poll deadline', async () => {
    const key = evmKey()
    const opt = option('opt_1', key.caip10, evmAsset, 1_000_000n, [
      authorization(key.account.address, 1_000_000n),
    ])
    const startedAt = Date.now()
    const { error, gateway } = await payAgainst(
      {
        options: () => ({ body: { options: [opt] } }),
        confirm: () => ({ body: { status: 'processing', isFinal: false, pollInMs: 100 } }),
        status: () => new Promise<never>(() => {}),
      },
      [key.signer],
      'opt_1',
      { poll: { waitSeconds: 0, intervalMs: 100, deadlineMs: 1_500 } },
      { attempts: 1, timeoutMs: 300 },
    )
    expect(error).toMatchObject({ code: 'poll_timeout' })
    expect(Date.now() - startedAt).toBeLessThan(10_000)
    // Several reads, each cut: the silence did not hold the flow past its deadline.
    expect(gateway.calls.status!.length).toBeGreaterThanOrEqual(2)
    expect(key.calls()).toBe(1)
  })
})

describe('class 3 and whole-options checks: an options answer that lies is refused before anything is shown', () => {
  it('refuses duplicate option ids (the user picks the 1 USDC row, the flow must not sign the 1,000 USDC one)', async () => {
    const key = evmKey()
    const expensive = option('opt_1', key.caip10, evmAsset, 1_000_000_000n, [
      authorization(key.account.address, 1_000_000_000n),
    ])
    const cheap = option('opt_1', key.caip10, evmAsset, 1_000_000n, [
      authorization(key.account.address, 1_000_000n),
    ])
    for (const options of [
      [expensive, cheap],
      [cheap, expensive],
    ]) {
      const { error } = await payAgainst({ options: () => ({ body: { options } }) }, [key.signer], 'opt_1')
      expect(error).toMatchObject({ code: 'invalid_response', context: { optionId: 'opt_1' } })
    }
    expect(key.calls()).toBe(0)
  })

  it('refuses info about another payment, a non-http form URL, and one asset shown with two decimals', async () => {
    const key = evmKey()
    const good = option('opt_a', key.caip10, evmAsset, 1_000_000n, [
      authorization(key.account.address, 1_000_000n),
    ])
    const info = {
      paymentId: 'pay_other',
      status: 'requires_action',
      amount: good.amount,
      expiresAt: good.expiresAt,
      merchant: { name: 'M' },
    }
    const lies = [
      { options: [good], info },
      { options: [{ ...good, collectData: { url: 'javascript:alert(1)' } }] },
      { options: [good], collectData: { url: 'data:text/html,<script>1</script>' } },
      {
        options: [
          good,
          {
            ...good,
            id: 'opt_b',
            amount: { ...good.amount, display: { ...good.amount.display, decimals: 0 } },
          },
        ],
      },
    ]
    for (const body of lies) {
      const { error } = await payAgainst({ options: () => ({ body }) }, [key.signer], 'opt_a')
      expect(isPayError(error), String(error)).toBe(true)
      expect(error).toMatchObject({ code: 'invalid_response' })
    }
    expect(key.calls()).toBe(0)
  })
})

describe('class 4: signing again after quote_expired never authorizes more than the option amount', () => {
  const expiredTwice = (n: number) => (n <= 2 ? gatewayError(422, 'quote_expired') : { body: succeeded })

  it('EIP-3009: a second authorization is not signed while the first can still be relayed', async () => {
    const key = evmKey()
    const { error, gateway } = await payAgainst(
      {
        options: () => ({
          body: { options: [option('opt_evm', key.caip10, evmAsset, 1_000_000n, [build])] },
        }),
        fetch: () => ({ body: { actions: [authorization(key.account.address, 1_000_000n)] } }),
        confirm: (_, n) => expiredTwice(n),
      },
      [key.signer],
      'opt_evm',
    )
    expect(error).toMatchObject({ code: 'quote_expired' })
    expect(key.calls()).toBe(1)
    expect(gateway.calls.confirm).toHaveLength(1)
  })

  it('EIP-3009: an authorization whose validBefore passed still counts while no node proves it unused', async () => {
    // "Can no longer execute" is not "did not execute" (issue 27, cause 4): the gateway may have
    // relayed it in time. This key's node is unreachable, so nothing proves it: no rebuild is signed.
    const key = evmKey()
    const past = BigInt(Math.floor(Date.now() / 1000) - 10)
    const { error } = await payAgainst(
      {
        options: () => ({
          body: { options: [option('opt_evm', key.caip10, evmAsset, 1_000_000n, [build])] },
        }),
        fetch: () => ({ body: { actions: [authorization(key.account.address, 1_000_000n, past)] } }),
        confirm: (_, n) => expiredTwice(n),
      },
      [key.signer],
      'opt_evm',
    )
    expect(error).toMatchObject({ code: 'quote_expired' })
    expect(key.calls()).toBe(1)
  })

  it('EIP-3009: a rebuild that fits beside the live first authorization is signed, one that does not is refused', async () => {
    const key = evmKey()
    let round = 0
    const { error } = await payAgainst(
      {
        options: () => ({
          body: { options: [option('opt_evm', key.caip10, evmAsset, 1_000_000n, [build])] },
        }),
        // 400k, then 600k (fits: 1M in all), then 1 more (does not).
        fetch: () => ({
          body: { actions: [authorization(key.account.address, [400_000n, 600_000n, 1n][round++]!)] },
        }),
        confirm: () => gatewayError(422, 'quote_expired'),
      },
      [key.signer],
      'opt_evm',
    )
    expect(error).toMatchObject({ code: 'quote_expired' })
    expect(key.calls()).toBe(2)
  })

  it('Solana: without a way to see the blockhash expire, the first transfer still counts and nothing more is signed', async () => {
    const { error } = await payAgainst(
      {
        options: () => ({
          body: { options: [option('opt_sol', solAccount, solAsset, 1_000_000n, [build])] },
        }),
        fetch: () => ({
          body: {
            actions: [rpc(sol, 'solana_signTransaction', [{ transaction: solanaTransfer(1_000_000n) }])],
          },
        }),
        confirm: (_, n) => expiredTwice(n),
      },
      [solanaSigner({ keypair: buyer, chains: [sol] })],
      'opt_sol',
    )
    expect(error).toMatchObject({ code: 'quote_expired' })
    expect(solanaSignCalls).toHaveBeenCalledTimes(1)
  })
  // The rebuild a Solana node proves safe, and a blockhash the node does not know: exposure.test.ts (LiteSVM).
})

describe('mixed EVM and Solana options', () => {
  it('control: the Solana option of a mixed list, with an EVM attestation, is signed on both keys', async () => {
    const key = evmKey()
    const attestation = rpc(base, 'personal_sign', [
      toHex(`caipay payment ${paymentId}: I pay 1 USDC on Solana.`),
      key.account.address,
    ])
    const options = [
      option('opt_evm', key.caip10, evmAsset, 1_000_000n, [authorization(key.account.address, 1_000_000n)]),
      option('opt_sol', solAccount, solAsset, 1_000_000n, [attestation, build]),
    ]
    const { result } = await payAgainst(
      {
        options: () => ({ body: { options } }),
        fetch: () => ({
          body: {
            actions: [
              attestation,
              rpc(sol, 'solana_signTransaction', [{ transaction: solanaTransfer(1_000_000n) }]),
            ],
          },
        }),
        confirm: () => ({ body: succeeded }),
      },
      [key.signer, solanaSigner({ keypair: buyer, chains: [sol] })],
      'opt_sol',
    )
    expect(result).toMatchObject({ status: 'succeeded' })
    expect(key.calls()).toBe(1)
    expect(solanaSignCalls).toHaveBeenCalledTimes(1)
  })

  it('refuses an EVM authorization slipped into a Solana option, and a Solana transfer into an EVM one', async () => {
    const key = evmKey()
    const sneaky = authorization(key.account.address, 1n)
    const cases = [
      {
        id: 'opt_sol',
        option: option('opt_sol', solAccount, solAsset, 1_000_000n, [build]),
        fetched: [sneaky, rpc(sol, 'solana_signTransaction', [{ transaction: solanaTransfer(1n) }])],
      },
      {
        id: 'opt_evm',
        option: option('opt_evm', key.caip10, evmAsset, 1_000_000n, [build]),
        fetched: [
          authorization(key.account.address, 1n),
          rpc(sol, 'solana_signTransaction', [{ transaction: solanaTransfer(1n) }]),
        ],
      },
    ]
    for (const { id, option: offered, fetched } of cases) {
      const { error } = await payAgainst(
        { options: () => ({ body: { options: [offered] } }), fetch: () => ({ body: { actions: fetched } }) },
        [key.signer, solanaSigner({ keypair: buyer, chains: [sol] })],
        id,
      )
      // The other chain's action moves funds, and the option's account is on another chain.
      expect(error).toMatchObject({
        code: 'action_rejected',
        context: expect.objectContaining({ optionAccount: offered.account }),
      })
    }
    expect(key.calls()).toBe(0)
    expect(solanaSignCalls).not.toHaveBeenCalled()
  })
})
