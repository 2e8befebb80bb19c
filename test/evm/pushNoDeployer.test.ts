import { afterAll, beforeAll, expect, it } from 'vitest'
import { create2Deployer } from '../../src/server/chains/evm/push.js'
import { createEvmEnv, type EvmEnv } from './support.js'

/**
 * A chain without the deterministic deployment proxy (Anvil started without its default CREATE2
 * deployer): the push forwarder factory could never be deployed there, so a deposit address would hold
 * the buyer's money with nothing able to sweep it. Such a chain offers no push option; its pull options
 * are untouched (docs/push-payments.md, "Not yet").
 */

let env: EvmEnv
beforeAll(async () => {
  env = await createEvmEnv({ anvilArgs: ['--disable-default-create2-deployer'] })
})
afterAll(() => env?.close())

it('offers no push option where the deployment proxy is missing, and the pull options still', async () => {
  expect(await env.publicClient.getCode({ address: create2Deployer })).toBeUndefined()
  const buyer = await env.buyer(2)
  const { paymentId } = await env.pay('1250')

  const sendOnly = await env.gw('POST', paymentId, '/options', { accounts: [] })
  expect(sendOnly.statusCode, sendOnly.body).toBe(200)
  expect(sendOnly.json.options).toEqual([])

  const withAccount = await env.gw('POST', paymentId, '/options', { accounts: [buyer.account] })
  expect(withAccount.statusCode, withAccount.body).toBe(200)
  const options: { source?: string; actions: unknown[] }[] = withAccount.json.options
  expect(options.length).toBeGreaterThan(0)
  expect(options.filter((option) => option.source === 'push')).toEqual([])
  expect(options.every((option) => option.actions.length > 0)).toBe(true)

  // Nothing is watched: no deposit address recorded, no scan cursor for the chain.
  expect(await env.t.db.selectFrom('evm_push_deposits').selectAll().execute()).toEqual([])
  expect(await env.t.db.selectFrom('evm_push_scans').selectAll().execute()).toEqual([])
})
