// QR codes as <img> sources: the modules qrcode-generator computes, drawn as one SVG path and
// handed over as a data: URL (the page's policy allows data: images). Nothing from the encoded
// text reaches the markup, only dark/light booleans.
import qrcode from "qrcode-generator";

/** The SVG path of the dark modules of a `count`×`count` grid, offset by `margin`. */
export function qrPath(count: number, isDark: (row: number, col: number) => boolean, margin: number): string {
  let d = "";
  for (let r = 0; r < count; r++) {
    let c = 0;
    while (c < count) {
      if (!isDark(r, c)) {
        c++;
        continue;
      }
      const start = c;
      while (c < count && isDark(r, c)) c++;
      d += `M${start + margin} ${r + margin}h${c - start}v1h${start - c}z`;
    }
  }
  return d;
}

/** A data: URL of an SVG QR code of `text` (byte mode, error correction M). */
export function qrDataUrl(text: string, margin = 4): string {
  const qr = qrcode(0, "M");
  qr.addData(text, "Byte");
  qr.make();
  const n = qr.getModuleCount();
  const size = n + margin * 2;
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${size} ${size}" shape-rendering="crispEdges">` +
    `<rect width="${size}" height="${size}" fill="#fff"/>` +
    `<path fill="#000" d="${qrPath(n, (r, c) => qr.isDark(r, c), margin)}"/></svg>`;
  return `data:image/svg+xml,${encodeURIComponent(svg)}`;
}
