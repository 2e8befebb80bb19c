import type { FastifyInstance } from 'fastify'
import { pageRoutes } from '../pages/routes.js'
import { wcpRoutes } from '../wcp/routes.js'
import { x402Routes } from '../x402/routes.js'
import { balanceRoutes } from './balances.js'
import { depositRoutes } from './deposits.js'
import { gatewayRoutes } from './gateway.js'
import { merchantRoutes } from './merchants.js'
import { paymentRoutes } from './payments.js'
import { refundRoutes } from './refunds.js'
import { settlementRoutes } from './settlements.js'
import { solanaPayRoutes } from './solanaPay.js'
import { subscriptionRoutes } from './subscriptions.js'
import { systemRoutes } from './system.js'
import { testRoutes } from './test.js'
import { webhookRoutes } from './webhooks.js'

/** Every route group of the app, registered in this order. Add a group with one line. */
export const routeModules: ReadonlyArray<(app: FastifyInstance) => Promise<void>> = [
  systemRoutes,
  merchantRoutes,
  settlementRoutes,
  paymentRoutes,
  refundRoutes,
  subscriptionRoutes,
  balanceRoutes,
  depositRoutes,
  gatewayRoutes,
  solanaPayRoutes,
  wcpRoutes,
  x402Routes,
  testRoutes,
  webhookRoutes,
  pageRoutes,
]
