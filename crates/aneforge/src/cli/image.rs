//! Image files for `aneforge classify`: PNG (gray, gray + alpha, RGB, RGBA, palette;
//! 1–16 bits) decoded to 8-bit RGB `[H, W, 3]`, alpha dropped, 16-bit samples cut to their high byte.

use std::io::Cursor;
use std::path::Path;

use crate::error::{Error, Result};
use crate::shape::MAX_EXTENT;

/// An 8-bit RGB image, row-major `[height, width, 3]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rgb8 {
    pub height: usize,
    pub width: usize,
    pub data: Vec<u8>,
}

impl Rgb8 {
    /// The largest centred square (the longer side cropped equally on both ends).
    pub fn center_square(&self) -> Rgb8 {
        let side = self.height.min(self.width);
        let (top, left) = ((self.height - side) / 2, (self.width - side) / 2);
        let data = (top..top + side)
            .flat_map(|r| {
                self.data[(r * self.width + left) * 3..(r * self.width + left + side) * 3]
                    .iter()
                    .copied()
            })
            .collect();
        Rgb8 {
            height: side,
            width: side,
            data,
        }
    }
    /// Planar `[3, H, W]` bytes (the layout of an NCHW image port).
    pub fn to_chw(&self) -> Vec<u8> {
        let plane = self.height * self.width;
        (0..3 * plane)
            .map(|i| self.data[(i % plane) * 3 + i / plane])
            .collect()
    }
}

/// Read and decode the PNG file at `path`; I/O errors and malformed or oversized files name the file.
pub fn read_png(path: &Path) -> Result<Rgb8> {
    let bytes = crate::program::files::read_regular(path)?;
    decode_png(&bytes, path)
}

/// Decode PNG `bytes` (named `file` in errors) to RGB8; the first frame of an animated PNG.
pub fn decode_png(bytes: &[u8], file: &Path) -> Result<Rgb8> {
    let bad = |e: png::DecodingError| Error::format(file, None, format!("not a readable PNG: {e}"));
    let mut decoder = png::Decoder::new(Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().map_err(bad)?;
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| Error::format(file, None, "PNG dimensions overflow the address space"))?;
    let mut buf = vec![0; size];
    let info = reader.next_frame(&mut buf).map_err(bad)?;
    let (height, width) = (info.height as usize, info.width as usize);
    if height > MAX_EXTENT || width > MAX_EXTENT {
        return Err(Error::format(
            file,
            None,
            format!("image is {width}x{height}; each side must be at most {MAX_EXTENT}"),
        ));
    }
    let channels = match info.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => {
            return Err(Error::format(file, None, "palette was not expanded"))
        }
    };
    let mut data = Vec::with_capacity(height * width * 3);
    for row in buf.chunks_exact(info.line_size).take(height) {
        for px in row[..width * channels].chunks_exact(channels) {
            match channels {
                1 | 2 => data.extend_from_slice(&[px[0]; 3]),
                _ => data.extend_from_slice(&px[..3]),
            }
        }
    }
    Ok(Rgb8 {
        height,
        width,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encode `pixels` (`channels` samples of `depth` bits per pixel, big-endian for 16-bit) as a PNG.
    fn encode(
        w: u32,
        h: u32,
        color: png::ColorType,
        depth: png::BitDepth,
        samples: &[u8],
        palette: Option<&[u8]>,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(color);
        enc.set_depth(depth);
        if let Some(p) = palette {
            enc.set_palette(p.to_vec());
        }
        let mut writer = enc.write_header().unwrap();
        writer.write_image_data(samples).unwrap();
        writer.finish().unwrap();
        out
    }

    #[test]
    fn every_color_type_decodes_to_the_pixels_written() {
        let (w, h) = (5usize, 3usize);
        let rgb: Vec<u8> = (0..w * h * 3).map(|i| (i * 37 % 251) as u8).collect();
        let gray: Vec<u8> = (0..w * h).map(|i| (i * 53 % 256) as u8).collect();
        let gray3: Vec<u8> = gray.iter().flat_map(|&g| [g; 3]).collect();
        let rgba: Vec<u8> = rgb.chunks(3).flat_map(|p| [p[0], p[1], p[2], 77]).collect();
        let ga: Vec<u8> = gray.iter().flat_map(|&g| [g, 9]).collect();
        let rgb16: Vec<u8> = rgb.iter().flat_map(|&v| [v, 0xAB]).collect();
        let palette: Vec<u8> = (0..4u8)
            .flat_map(|i| [i * 60, 255 - i * 60, i * 13])
            .collect();
        let idx: Vec<u8> = (0..w * h).map(|i| (i % 4) as u8).collect();
        let idx_rgb: Vec<u8> = idx
            .iter()
            .flat_map(|&i| palette[i as usize * 3..i as usize * 3 + 3].to_vec())
            .collect();
        use png::{BitDepth::*, ColorType::*};
        /// Color type, bit depth, samples written, palette, RGB8 expected back.
        type Case<'a> = (
            png::ColorType,
            png::BitDepth,
            &'a [u8],
            Option<&'a [u8]>,
            &'a [u8],
        );
        let cases: [Case; 6] = [
            (Rgb, Eight, &rgb, None, &rgb),
            (Rgba, Eight, &rgba, None, &rgb),
            (Grayscale, Eight, &gray, None, &gray3),
            (GrayscaleAlpha, Eight, &ga, None, &gray3),
            (Rgb, Sixteen, &rgb16, None, &rgb),
            (Indexed, Eight, &idx, Some(&palette), &idx_rgb),
        ];
        for (color, depth, samples, pal, want) in cases {
            let img = decode_png(
                &encode(w as u32, h as u32, color, depth, samples, pal),
                Path::new("t.png"),
            )
            .unwrap();
            assert_eq!((img.height, img.width), (h, w), "{color:?}");
            assert_eq!(img.data, want, "{color:?} {depth:?}");
        }
    }

    #[test]
    fn crops_and_planar_layout() {
        let img = Rgb8 {
            height: 2,
            width: 4,
            data: (0..24).collect(),
        };
        let sq = img.center_square();
        assert_eq!((sq.height, sq.width), (2, 2));
        assert_eq!(sq.data, [3, 4, 5, 6, 7, 8, 15, 16, 17, 18, 19, 20]);
        assert_eq!(sq.to_chw(), [3, 6, 15, 18, 4, 7, 16, 19, 5, 8, 17, 20]);
    }

    #[test]
    fn truncated_and_garbage_files_are_format_errors() {
        let good = encode(
            4,
            4,
            png::ColorType::Rgb,
            png::BitDepth::Eight,
            &[7; 48],
            None,
        );
        for bad in [&good[..good.len() / 2], &b"GIF89a not a png"[..], &[][..]] {
            let err = decode_png(bad, Path::new("x.png")).unwrap_err();
            assert!(
                matches!(&err, Error::Format { file, .. } if file == Path::new("x.png")),
                "{err}"
            );
        }
        assert!(matches!(
            read_png(Path::new("/nonexistent/x.png")),
            Err(Error::Io { .. })
        ));
    }
}
