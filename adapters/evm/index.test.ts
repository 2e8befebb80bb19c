import { expect, it } from 'vitest'
import * as api from './index.js'

// An accidental change to the public surface of caipay/adapters/evm fails here.
it('exports exactly this API', () => {
  expect(Object.keys(api).sort()).toMatchInlineSnapshot(`
    [
      "decodeEvmAction",
      "decodeTransaction",
      "decodeTypedData",
      "evmForwardParams",
      "evmMandateStatus",
      "evmMethods",
      "evmSignatureStatus",
      "evmSigner",
      "parsePersonalSignParams",
      "parseTransactionParams",
      "parseTypedDataParams",
      "permit2RevokeCall",
    ]
  `)
})
