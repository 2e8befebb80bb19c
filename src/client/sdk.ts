export interface SdkInfo {
  name: string
  version: string
  platform: string
}

const sdkVersion = '0.1.0'

/** Without Node built-ins: the runtime is told apart by its globals. */
function detectPlatform(): string {
  const g = globalThis as {
    navigator?: { product?: string }
    document?: unknown
    process?: { versions?: { node?: string } }
  }
  if (g.navigator?.product === 'ReactNative') return 'react-native'
  if (g.document !== undefined) return 'browser'
  if (g.process?.versions?.node) return 'node'
  return 'unknown'
}

export function sdkHeaders(sdk: Partial<SdkInfo> = {}): Record<string, string> {
  return {
    'Sdk-Name': sdk.name ?? 'caipay',
    'Sdk-Version': sdk.version ?? sdkVersion,
    'Sdk-Platform': sdk.platform ?? detectPlatform(),
  }
}
