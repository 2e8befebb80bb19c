import { Keypair, Transaction } from '@solana/web3.js'
import pg from 'pg'
import type { Hex, PrivateKeyAccount } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { expect } from 'vitest'
import type { Action, PaymentOption, WalletRpcAction } from '../../src/contract/gateway.js'
import { signAuthorization } from '../anvil.js'
import { createTestServer, type TestServer, type TestServerOptions } from '../server/harness.js'
import { createMerchant, createPayment, headers } from '../server/helpers.js'

export const chains = {
  ethereum: 'eip155:1',
  base: 'eip155:8453',
  solana: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp',
} as const

export const usdc = {
  ethereum: 'eip155:1/erc20:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48',
  base: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  solana: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp/token:EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v',
} as const

/** A buyer holding real keys on both namespaces, signing the way a wallet would. */
export interface Buyer {
  evm: PrivateKeyAccount
  solana: Keypair
  accounts: { ethereum: string; base: string; solana: string }
  sign(action: Action): Promise<string>
}

export function createBuyer(): Buyer {
  const evm = privateKeyToAccount(generatePrivateKey())
  const solana = Keypair.generate()
  return {
    evm,
    solana,
    accounts: {
      ethereum: `${chains.ethereum}:${evm.address}`,
      base: `${chains.base}:${evm.address}`,
      solana: `${chains.solana}:${solana.publicKey.toBase58()}`,
    },
    async sign(action) {
      if (action.type !== 'walletRpc') throw new Error('build actions are resolved by fetch, not signed')
      const { walletRpc } = action
      const params = JSON.parse(walletRpc.params) as unknown[]
      switch (walletRpc.method) {
        case 'eth_signTypedData_v4':
          return signAuthorization(evm, JSON.parse(params[1] as string))
        case 'personal_sign':
          return evm.signMessage({ message: { raw: params[0] as Hex } })
        case 'solana_signTransaction': {
          const { transaction } = params[0] as { transaction: string }
          const tx = Transaction.from(Buffer.from(transaction, 'base64'))
          tx.partialSign(solana)
          return tx.serialize().toString('base64')
        }
        default:
          throw new Error(`test buyer cannot ${walletRpc.method}`)
      }
    },
  }
}

export interface GatewayEnv {
  t: TestServer
  apiKey: string
  merchantId: string
  /** A wallet-role key of another partner: wallets pay other partners' merchants. */
  walletKey: string
  /** The app clock, unix seconds (tests move it with t.advanceTime). */
  nowS(): number
  pay(value?: string, unit?: string, extra?: Record<string, unknown>): Promise<string>
  gw(
    method: 'GET' | 'POST',
    paymentId: string,
    suffix?: string,
    body?: unknown,
    extraHeaders?: Record<string, string>,
  ): ReturnType<TestServer['request']>
  /** options -> fetch (when it builds) -> sign every action, in order. */
  prepare(
    paymentId: string,
    buyer: Buyer,
    pick: (o: PaymentOption) => boolean,
    accounts?: string[],
  ): Promise<{ option: PaymentOption; actions: WalletRpcAction[]; results: string[] }>
}

export async function createGatewayEnv(options: TestServerOptions = {}): Promise<GatewayEnv> {
  const t = await createTestServer(options)
  const { apiKey } = await t.createKey('test')
  const merchantId = await createMerchant(t, apiKey)
  const otherPartner = await t.createPartner()
  const { apiKey: walletKey } = await t.createKey('test', 'wallet', otherPartner)
  let reference = 0
  const env: GatewayEnv = {
    t,
    apiKey,
    merchantId,
    walletKey,
    nowS: () => Math.floor(t.app.now().getTime() / 1000),
    async pay(value = '1250', unit = 'iso4217/USD', extra = {}) {
      reference += 1
      return createPayment(t, apiKey, merchantId, {
        referenceId: `order-${reference}`,
        amount: { unit, value },
        ...extra,
      })
    },
    gw(method, paymentId, suffix = '', body, extraHeaders = {}) {
      return t.request({
        method,
        url: `/v1/gateway/payment/${paymentId}${suffix}`,
        headers: { ...headers(walletKey), ...extraHeaders },
        ...(body !== undefined ? { payload: body as Record<string, unknown> } : {}),
      })
    },
    async prepare(paymentId, buyer, pick, accounts = Object.values(buyer.accounts)) {
      const res = await env.gw('POST', paymentId, '/options', { accounts })
      expect(res.statusCode, res.body).toBe(200)
      const option: PaymentOption = res.json.options.find(pick)
      expect(
        option,
        JSON.stringify(res.json.options.map((o: PaymentOption) => [o.account, o.amount.unit])),
      ).toBeDefined()
      let actions = option.actions.filter((a): a is WalletRpcAction => a.type === 'walletRpc')
      const build = option.actions.find((a) => a.type === 'build')
      if (build) {
        const fetched = await env.gw('POST', paymentId, '/fetch', {
          optionId: option.id,
          data: build.build.data,
        })
        expect(fetched.statusCode, fetched.body).toBe(200)
        actions = fetched.json.actions
      }
      const results: string[] = []
      for (const action of actions) results.push(await buyer.sign(action))
      return { option, actions, results }
    },
  }
  return env
}

export const isSolanaOption = (o: PaymentOption) => o.account.startsWith('solana:') && o.actions.length === 1
export const isMixedOption = (o: PaymentOption) => o.account.startsWith('solana:') && o.actions.length === 2
export const isBaseOption = (o: PaymentOption) => o.account.startsWith('eip155:8453:')

/** The opaque data of an option's build action (what fetch is called with). */
export function buildData(option: PaymentOption): string {
  const build = option.actions.find((a) => a.type === 'build')
  if (!build) throw new Error(`option ${option.id} has nothing to build`)
  return build.build.data
}

/** The option `pred` selects; fails the test when there is none. */
export function pick(options: readonly PaymentOption[], pred: (o: PaymentOption) => boolean): PaymentOption {
  const option = options.find(pred)
  if (!option) throw new Error(`no such option among ${options.map((o) => o.account).join(', ')}`)
  return option
}

/**
 * The statements `run` sends PostgreSQL through any pooled client, one round trip each: `named` for a
 * prepared one (parsed and planned once per connection), else its text.
 */
export async function statementsOf<T>(run: () => Promise<T>): Promise<{ result: T; statements: string[] }> {
  const statements: string[] = []
  const original = pg.Client.prototype.query
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const first = args[0] as string | { name?: string; text?: string }
    statements.push(typeof first === 'string' ? first : first.name ? 'named' : String(first.text))
    return (original as (...a: unknown[]) => unknown).apply(this, args)
  } as typeof original
  try {
    return { result: await run(), statements }
  } finally {
    pg.Client.prototype.query = original
  }
}
