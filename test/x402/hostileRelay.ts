import { randomBytes } from 'node:crypto'
import { ExactEvmScheme as ExactEvmClient } from '@x402/evm/exact/client'
import { createWalletClient, type Hex, http, toHex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll } from 'vitest'
import { anvilChain, anvilControl, anvilPrivateKeys } from '../anvil.js'
import { createEvmEnv, type EvmEnv, usdc } from '../evm/support.js'
import { until } from '../until.js'
import { exactRequirements, facilitatorBody, facilitatorPost } from './support.js'

/**
 * What the hostile-relay suites (relayBudgets, relayDeploy, relayGas) share: caipay's x402 facilitator on
 * Anvil with the suite's relay settings, its job runner, an attacker's wallet, the requirements every
 * payload claims, and a settle held in the pool while the attacker acts.
 */

/** What the attacker does on chain (its arguments cast: the suites deploy and call their own artifacts). */
export interface AttackerWallet {
  deployContract(parameters: never): Promise<Hex>
  writeContract(parameters: never): Promise<Hex>
}

/** What every payload of these suites claims: 0.01 of the env's token to its merchant. */
export const price = usdc(0.01)

/** The file's env, made before its tests (`setup` runs before the runner starts) and closed after them. */
export function hostileRelaySuite(
  options: Parameters<typeof createEvmEnv>[0] & { setup?: (env: EvmEnv) => Promise<void> },
) {
  let env!: EvmEnv
  beforeAll(async () => {
    const { setup, ...envOptions } = options
    env = await createEvmEnv(envOptions)
    await setup?.(env)
    env.startRunner()
  }, 60_000)
  afterAll(async () => {
    await env?.close()
  })

  const wallet = (key: Hex): AttackerWallet =>
    createWalletClient({
      chain: anvilChain(env.anvil.chainId, env.anvil.rpcUrl),
      transport: http(env.anvil.rpcUrl),
      account: privateKeyToAccount(key),
    })
  const requirements = () => exactRequirements(env, price)
  const post = facilitatorPost(
    () => env.t,
    () => env.liveKey,
  )
  /** The executor's transactions (of `purpose`, else all), in the order it signed them. */
  const executorTransactions = (purpose?: 'relay' | 'deploy') => {
    let query = env.t.db.selectFrom('evm_transactions').selectAll()
    if (purpose) query = query.where('purpose', '=', purpose)
    return query.orderBy('id').execute()
  }

  return {
    get env() {
      return env
    },
    /** The attacker: deploys its accounts and factories, flips them ahead of the executor. */
    attacker: () => wallet(anvilPrivateKeys[6]),
    requirements,
    post,
    executorTransactions,
    relays: () => executorTransactions('relay'),

    /**
     * A payload authorizing `price` from `from` (a contract account or an undeployed one: `signature`
     * decides, any bytes by default), claimed for requirements().
     */
    authorizationBody(from: string, signature: Hex = `0x${'ab'.repeat(65)}`) {
      const payload = {
        x402Version: 2,
        accepted: requirements(),
        payload: {
          authorization: {
            from,
            to: env.merchant.destination,
            value: price.toString(),
            validAfter: '0',
            validBefore: String(Math.floor(Date.now() / 1000) + 600),
            nonce: toHex(randomBytes(32)),
          },
          signature,
        },
      }
      return facilitatorBody(payload, requirements() as never)
    },

    /** An honest payer's payload (the published client's). */
    async honestBody(key: Hex) {
      const created = await new ExactEvmClient(privateKeyToAccount(key)).createPaymentPayload(
        2,
        requirements() as never,
      )
      return facilitatorBody(
        { x402Version: 2, accepted: requirements(), payload: created.payload },
        requirements() as never,
      )
    },

    /**
     * Settles `body` with mining held: the executor's first new transaction (of `purpose`) to reach the
     * pool is handed to `meanwhile`, then a block is mined. A settle answered before any send just
     * answers (`sent` null).
     */
    async settleHeld(
      body: unknown,
      meanwhile: (sent: Awaited<ReturnType<typeof executorTransactions>>[number]) => Promise<void>,
      options: { key?: string; purpose?: 'relay' | 'deploy' } = {},
    ) {
      const control = anvilControl(env.anvil.rpcUrl)
      const known = new Set((await executorTransactions(options.purpose)).map((r) => r.hash))
      await control.setAutomine(false)
      try {
        let answered = false
        const settled = post('settle', body, options.key).finally(() => {
          answered = true
        })
        const { sent } = await until(
          async () => {
            if (answered) return { sent: null }
            const fresh = (await executorTransactions(options.purpose)).find((r) => !known.has(r.hash))
            return fresh && (await control.pending()).includes(fresh.hash as Hex)
              ? { sent: fresh }
              : undefined
          },
          'a transaction in the pool, or the answer',
          20_000,
        )
        if (sent) {
          await meanwhile(sent)
          await control.mine(1)
        }
        return { settled: await settled, sent }
      } finally {
        await control.setAutomine(true)
      }
    },
  }
}
