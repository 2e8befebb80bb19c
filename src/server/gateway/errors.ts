import type { PayError } from '../../errors/PayError.js'
import { validationError } from '../errors.js'

/** `400 params_validation` pointing at one request field, rendered like a schema failure. */
export function paramsError(path: string, message: string): PayError {
  return validationError([{ path, message }])
}
