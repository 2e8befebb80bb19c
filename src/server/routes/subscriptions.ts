import type { FastifyInstance } from 'fastify'
import { endpoints } from '../../contract/endpoints.js'
import { fail } from '../errors.js'
import { defineRoute } from '../route.js'
import { inTransaction } from '../store/db.js'
import { checkAdvance, createTestClock, findTestClock, testClockJson } from '../subscriptions/clocks.js'
import { createSubscription } from '../subscriptions/create.js'
import {
  cancelSubscription,
  chargeDueSubscriptions,
  simulateSandboxBuyer,
} from '../subscriptions/lifecycle.js'
import { type SubscriptionSweep, startSubscriptionSweep } from '../subscriptions/sweep.js'
import { findMerchantSubscription, listSubscriptions, subscriptionJson } from '../subscriptions/views.js'

export async function subscriptionRoutes(app: FastifyInstance): Promise<void> {
  defineRoute(app, endpoints.createSubscription, ({ db, auth, merchant, body, config, now, afterCommit }) =>
    createSubscription(db, { auth, merchant, body, config, now, afterCommit }),
  )

  defineRoute(app, endpoints.listSubscriptions, ({ db, merchant, query, config }) =>
    listSubscriptions(db, config, merchant.id, query),
  )

  defineRoute(app, endpoints.getSubscription, async ({ db, merchant, params, config }) =>
    subscriptionJson(await findMerchantSubscription(db, merchant.id, params.id), config),
  )

  defineRoute(app, endpoints.cancelSubscription, async ({ db, merchant, params, config, now }) => {
    const row = await findMerchantSubscription(db, merchant.id, params.id)
    const cancelled = await cancelSubscription(db, {
      subscriptionId: row.id,
      reason: 'cancelled_by_merchant',
      now,
    })
    return subscriptionJson(cancelled, config)
  })

  defineRoute(
    app,
    endpoints.simulateSubscription,
    async ({ db, auth, merchant, params, body, config, now }) => {
      if (auth.mode !== 'test')
        fail('not_sandbox_api_key', 'Use a test API key (svc_test_...) to simulate outcomes.')
      const row = await findMerchantSubscription(db, merchant.id, params.id)
      return subscriptionJson(await simulateSandboxBuyer(db, row, body.buyer, now), config)
    },
  )

  defineRoute(app, endpoints.createTestClock, async ({ db, auth, body, now }) =>
    testClockJson(await createTestClock(db, { auth, frozenTime: body.frozenTime, now })),
  )

  defineRoute(app, endpoints.getTestClock, async ({ db, auth, params }) =>
    testClockJson(await findTestClock(db, auth, params.id)),
  )

  // One advance of a clock at a time (its row is locked): the periods on the way are charged in order.
  defineRoute(app, endpoints.advanceTestClock, async ({ db, auth, params, body, config }) => {
    const clock = await findTestClock(db, auth, params.id)
    const target = checkAdvance(clock, body.frozenTime)
    await chargeDueSubscriptions(db, config, { clockId: clock.id, until: target })
    const advanced = await inTransaction(db, async (trx) => {
      const locked = await findTestClock(trx, auth, params.id, { forUpdate: true })
      if (locked.frozen_time.getTime() >= target.getTime()) return locked
      return trx
        .updateTable('test_clocks')
        .set({ frozen_time: target, updated_at: new Date() })
        .where('id', '=', clock.id)
        .returningAll()
        .executeTakeFirstOrThrow()
    })
    return testClockJson(advanced)
  })

  let sweep: SubscriptionSweep | undefined
  app.addHook('onReady', async () => {
    sweep = startSubscriptionSweep({
      db: app.db,
      config: app.config,
      now: () => app.now(),
      drivers: app.chainDrivers,
      onError: (error) => app.log.error({ err: error }, 'subscription sweep failed'),
    })
  })
  app.addHook('onClose', async () => sweep?.stop())
}
