import type { FastifyInstance } from 'fastify'
import { endpoints } from '../../contract/endpoints.js'
import { defineRoute } from '../route.js'
import {
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  listDeliveries,
  listEndpoints,
  retryDelivery,
  rotateSecret,
  sendTestEvent,
} from '../webhooks/endpoints.js'

export async function webhookRoutes(app: FastifyInstance): Promise<void> {
  defineRoute(app, endpoints.createWebhookEndpoint, ({ db, config, auth, body, now }) =>
    createEndpoint(db, config, auth, body, now),
  )
  defineRoute(app, endpoints.listWebhookEndpoints, ({ db, auth, query }) => listEndpoints(db, auth, query))
  defineRoute(app, endpoints.getWebhookEndpoint, ({ db, auth, params }) => getEndpoint(db, auth, params.id))
  defineRoute(app, endpoints.deleteWebhookEndpoint, ({ db, auth, params, now }) =>
    deleteEndpoint(db, auth, params.id, now),
  )
  defineRoute(app, endpoints.rotateWebhookSecret, ({ db, config, auth, params, now }) =>
    rotateSecret(db, config, auth, params.id, now),
  )
  // Both send now and answer with the outcome; they do not hold a transaction across the attempt.
  defineRoute(app, endpoints.sendTestWebhook, ({ request, auth, params, config, now }) =>
    sendTestEvent(request.server.db, config, auth, params.id, now),
  )
  defineRoute(app, endpoints.listWebhookDeliveries, ({ db, auth, params, query }) =>
    listDeliveries(db, auth, params.id, query),
  )
  defineRoute(app, endpoints.retryWebhookDelivery, ({ request, auth, params, config, now }) =>
    retryDelivery(request.server.db, config, auth, params.id, params.deliveryId, now),
  )
}
