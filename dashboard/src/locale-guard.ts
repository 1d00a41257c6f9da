/**
 * uPlot builds `Intl.NumberFormat(navigator.language)` as its module loads. A browser whose language tag Intl
 * refuses (Chromium started under LANG=C reports `en-US@posix`) would throw there and take the whole app
 * down, so such a tag is replaced by `en-US` first. charts.tsx imports this module before uPlot.
 */
try {
  new Intl.NumberFormat(navigator.language);
} catch {
  Object.defineProperty(navigator, 'language', { value: 'en-US', configurable: true });
}
export {};
