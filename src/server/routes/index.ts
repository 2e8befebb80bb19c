import type { FastifyInstance } from 'fastify'
import { merchantRoutes } from './merchants.js'
import { paymentRoutes } from './payments.js'
import { refundRoutes } from './refunds.js'
import { settlementRoutes } from './settlements.js'
import { systemRoutes } from './system.js'

/** Every route group of the app, registered in this order. Add a group with one line. */
export const routeModules: ReadonlyArray<(app: FastifyInstance) => Promise<void>> = [
  systemRoutes,
  merchantRoutes,
  settlementRoutes,
  paymentRoutes,
  refundRoutes,
]
