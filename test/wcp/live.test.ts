import type { Action } from '@walletconnect/pay'
import { type Hex, hashTypedData, recoverAddress } from 'viem'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mintTestToken } from '../anvil.js'
import {
  coinbaseFactoryAddress,
  deployPayers,
  forViem,
  type Payers,
  signAsSafeOwner,
  type TypedJson,
} from '../evm/payers.js'
import { createEvmEnv, type EvmEnv, usdc } from '../evm/support.js'
import { guardNetwork, type NetworkGuard } from '../walletconnect/clients.js'
import { listenForSdk, type SdkServer } from './support.js'

// Smart-account payers through the published WalletConnect Pay SDK, in live mode on Anvil: the SDK
// carries whatever the account signs (an ERC-1271 wrapper, an ERC-6492 envelope) and caipay verifies it
// by the payer's code and relays it, as through the native gateway.

let env: EvmEnv
let payers: Payers
let sdk: SdkServer
let network: NetworkGuard

beforeAll(async () => {
  network = guardNetwork()
  env = await createEvmEnv({
    anvilArgs: ['--hardfork', 'prague'],
    chainConfig: { eip6492Factories: [coinbaseFactoryAddress] },
  })
  payers = await deployPayers(env)
  env.startRunner()
  sdk = await listenForSdk(env.t.app)
}, 60_000)

afterAll(async () => {
  await env?.close()
  network?.restore()
})

/** Pays $10 through the SDK as `payer`, whose wallet signs the option's typed data with `sign`. */
async function payThroughSdk(payer: `0x${string}`, sign: (typed: TypedJson) => Promise<Hex>) {
  await mintTestToken(env.anvil.rpcUrl, env.token, payer, usdc(25))
  const { paymentId } = await env.pay('1000')
  const pay = sdk.client({ apiKey: env.walletKey })
  const account = `${env.anvil.caip2}:${payer}`
  const { options } = await pay.getPaymentOptions({ paymentLink: paymentId, accounts: [account] })
  const option = options.find((o) => o.account === account)
  expect(option, JSON.stringify(options)).toBeDefined()
  const actions: readonly Action[] = await pay.getRequiredPaymentActions({ paymentId, optionId: option!.id })
  expect(actions.map((a) => a.walletRpc.method)).toEqual(['eth_signTypedData_v4'])
  const typed = JSON.parse(JSON.parse(actions[0]!.walletRpc.params)[1]) as TypedJson
  const signature = await sign(typed)
  const confirmed = await pay.confirmPayment({ paymentId, optionId: option!.id, signatures: [signature] })
  expect(['processing', 'succeeded']).toContain(confirmed.status)
  const final = await env.waitFinal(paymentId)
  expect(final.status).toBe('succeeded')
  expect(await env.balance(payer)).toBe(usdc(15))
  return { paymentId, signature }
}

describe('live smart-account payers through the WalletConnect Pay SDK', () => {
  it('a Safe 1.4.1 pays with its owner-signed ERC-1271 signature', async () => {
    const { owner, address } = await payers.safeAccount()
    let digest: Hex | undefined
    const { signature } = await payThroughSdk(address, (typed) => {
      digest = hashTypedData(forViem(typed))
      return signAsSafeOwner(owner, address, env.anvil.chainId, digest)
    })
    // Not the Safe's own ECDSA signature: only its ERC-1271 check accepts it.
    expect(await recoverAddress({ hash: digest!, signature })).not.toBe(address)
  })

  it('an undeployed Coinbase-style account pays with an ERC-6492 signature: deployed once, paid once', async () => {
    const { account } = await payers.coinbase(false)
    expect(await env.publicClient.getCode({ address: account.address })).toBeUndefined()
    const { paymentId, signature } = await payThroughSdk(account.address, (typed) =>
      account.signTypedData(forViem(typed) as never),
    )
    expect(signature.endsWith('6492'.repeat(16))).toBe(true)
    expect(await env.publicClient.getCode({ address: account.address })).not.toBeUndefined()
    const sent = await env.t.db
      .selectFrom('evm_transactions')
      .select(['purpose', 'status'])
      .where('payment_id', '=', paymentId)
      .where('purpose', 'in', ['deploy', 'relay'])
      .orderBy('created_at')
      .execute()
    expect(sent).toEqual([
      { purpose: 'deploy', status: 'succeeded' },
      { purpose: 'relay', status: 'succeeded' },
    ])
  })

  it('sent nothing off loopback but the SDK telemetry, which the guard refused', () => {
    expect(network.external.every((url) => new URL(url).hostname.endsWith('walletconnect.org'))).toBe(true)
  })
})
