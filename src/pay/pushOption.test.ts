import { describe, expect, it } from 'vitest'
import type { PaymentOption } from '../contract/index.js'
import { isPayError } from '../errors/PayError.js'
import { pushFallback } from '../flow/options.js'
import {
  amount,
  evmSigner,
  option,
  scriptedGateway,
  solanaSigner,
  solChain,
  statusSequence,
  usdcSol,
} from '../flow/testkit.js'
import { createPayClient } from './createPayClient.js'

const paymentId = 'pay_push'
const link = `https://pay.example.com/pay/${paymentId}`
const reference = 'Fkc4FN7PPhyGsAcHPW3dBBJ5BgtYkDNd5u9p8h2TJ7Xs'
const url = `solana:9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM?amount=1.25&spl-token=EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v&reference=${reference}`

const push: PaymentOption = option({
  id: 'opt_push',
  account: `${solChain}:9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM`,
  amount: amount(`caip19/${usdcSol}`, '1250000'),
  actions: [],
  source: 'push',
  push: {
    url,
    reference,
    recipient: '9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM',
    asset: usdcSol,
    amount: '1250000',
    expiresAt: 2_000_000_000,
  },
})

function payClient(options: PaymentOption[]) {
  const evm = evmSigner()
  const sol = solanaSigner()
  const gateway = scriptedGateway({
    getOptions: async () => ({ options }),
    fetchActions: async () => ({ actions: [] }),
    confirm: async () => ({ status: 'processing', isFinal: false, pollInMs: 5 }),
    getStatus: statusSequence('succeeded'),
  })
  const pay = createPayClient({
    gateway,
    signers: [evm, sol],
    trustedHosts: ['pay.example.com'],
    poll: { sleep: async () => undefined, jitter: 0 },
  })
  const signed = () => evm.requests.length + sol.requests.length
  return { pay, gateway, signed }
}

describe('push options in the wallet library', () => {
  it('pays the first pull option by default, never the push option listed before it', async () => {
    const { pay, gateway, signed } = payClient([push, option()])
    await expect(pay.pay(link)).resolves.toMatchObject({ status: 'succeeded' })
    expect(gateway.callsTo('confirm')[0]![1]).toMatchObject({ optionId: 'opt_evm' })
    expect(signed()).toBe(1)
  })

  it('offers the push options as the fallback when no signer can pay an option', async () => {
    const { pay, gateway, signed } = payClient([push])
    const error = await pay.pay(link).catch((e: unknown) => e)
    expect(isPayError(error, 'no_options')).toBe(true)
    expect((error as { context: { pushUrls: string[] } }).context.pushUrls).toEqual([url])
    expect(pushFallback([push])).toEqual([push])
    expect(pushFallback([push, option()])).toEqual([])
    expect(gateway.callsTo('fetchActions')).toEqual([])
    expect(signed()).toBe(0)
  })

  it('refuses to select or execute a push option (push_option) and asks no key to sign', async () => {
    const { pay, gateway, signed } = payClient([push, option()])
    const error = await pay.pay(link, { selectOption: () => 'opt_push' }).catch((e: unknown) => e)
    expect(isPayError(error, 'push_option')).toBe(true)
    expect((error as { context: { url: string } }).context.url).toBe(url)
    // A push option the gateway sent without its `source` is still one: its `push` request says so.
    const unlabelled = { ...push, source: undefined } as unknown as PaymentOption
    const again = payClient([unlabelled])
    const refused = await again.pay.pay(link, { selectOption: () => 'opt_push' }).catch((e: unknown) => e)
    expect(isPayError(refused, 'push_option')).toBe(true)
    expect(gateway.callsTo('fetchActions')).toEqual([])
    expect(gateway.callsTo('confirm')).toEqual([])
    expect(signed() + again.signed()).toBe(0)
  })
})
