/** caipay/server: the reference payments server. */
export { createApiKey, createAppId, createPartner, revokeApiKey } from './accounts/accounts.js'
export { type BuildAppOptions, buildApp } from './app.js'
export {
  type AssetConfig,
  type ChainConfig,
  type ConfigFile,
  defaultConfig,
  loadConfig,
  readConfigFile,
  resolveConfig,
  type ServerConfig,
} from './config.js'
export type { AuthContext } from './context.js'
export { paymentTransitions, transitionPayment } from './payments/lifecycle.js'
export { type DefineRouteOptions, defineRoute, type RouteContext, type RouteHandler } from './route.js'
export { type RunningServer, type StartServerOptions, startServer } from './server.js'
export {
  createDb,
  type Db,
  inTransaction,
  type OpenDatabaseOptions,
  type OpenedDatabase,
  openDatabase,
} from './store/db.js'
export { migrate } from './store/migrate.js'
export type { Database, KeyRole, Mode } from './store/schema.js'
