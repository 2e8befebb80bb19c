// Preload (node --require) that makes npm believe it runs on CAIPAY_FAKE_PLATFORM, e.g. darwin/arm64:
// npm's own --os/--cpu flags only apply to optional packages, so they cannot show EBADPLATFORM.
const [platform, arch] = (process.env.CAIPAY_FAKE_PLATFORM ?? '').split('/')
if (platform && arch) {
  Object.defineProperty(process, 'platform', { value: platform })
  Object.defineProperty(process, 'arch', { value: arch })
}
