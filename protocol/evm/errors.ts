import { PayError } from '../../src/errors/PayError.js'

export function invalidAction(message: string, context: Record<string, unknown>, cause?: unknown): PayError {
  return new PayError({ code: 'invalid_action', message, context, cause })
}

export function rejected(message: string, context: Record<string, unknown>): PayError {
  return new PayError({ code: 'action_rejected', message, context })
}
