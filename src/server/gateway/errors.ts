import type { ServiceErrorCode } from '../../contract/errors.js'
import { serviceErrorStatus } from '../../contract/errors.js'
import { PayError } from '../../errors/PayError.js'

/** A service error with its HTTP status from the contract's table. */
export function serviceError(
  code: ServiceErrorCode,
  message: string,
  context?: Record<string, unknown>,
): PayError<ServiceErrorCode> {
  return new PayError({ code, message, status: serviceErrorStatus[code], ...(context ? { context } : {}) })
}

/** `400 params_validation` pointing at one request field, rendered like a schema failure. */
export function paramsError(path: string, message: string): PayError<ServiceErrorCode> {
  return serviceError('params_validation', message, { issues: [{ path, message }] })
}
