//! An opened GGUF file: the memory map, the parsed header, metadata and tensor infos, and
//! borrowed views of each tensor's bytes that dequantize to f32.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use crate::architecture::Architecture;
use crate::cursor::Cursor;
use crate::error::{GgufError, Result};
use crate::metadata::Metadata;
use crate::tensors::TensorInfo;
use crate::{header, metadata, quant, tensors};

/// A parsed GGUF file whose tensor data stays in the memory map (nothing is copied until
/// a tensor is dequantized).
#[derive(Debug)]
pub struct GgufFile {
    path: String,
    map: Mmap,
    version: u32,
    metadata: Metadata,
    alignment: u64,
    data_offset: u64,
    tensors: Vec<TensorInfo>,
    by_name: HashMap<String, usize>,
}

/// One tensor: its info and its bytes borrowed from the file's memory map.
#[derive(Debug, Clone, Copy)]
pub struct Tensor<'a> {
    path: &'a str,
    info: &'a TensorInfo,
    data: &'a [u8],
}

/// `Io` naming `path`.
fn io_error(path: &str) -> impl FnOnce(std::io::Error) -> GgufError + '_ {
    move |source| GgufError::Io {
        path: path.into(),
        source,
    }
}

/// Refuse anything but a regular file (a FIFO or device would block or never end).
fn check_regular(path: &str, file_type: std::fs::FileType) -> Result<()> {
    if file_type.is_file() {
        return Ok(());
    }
    let kind = if file_type.is_dir() {
        "a directory"
    } else {
        "a device, FIFO or socket"
    };
    Err(GgufError::NotRegularFile {
        path: path.into(),
        kind,
    })
}

impl GgufFile {
    /// Open and parse `path` (a regular file): header, metadata, tensor infos; every tensor's
    /// data span is checked to lie inside the file. Errors name the file and the culprit.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let path = path.as_ref().display().to_string();
        // Stat before opening: opening a FIFO for reading would block.
        check_regular(
            &path,
            std::fs::metadata(&path)
                .map_err(io_error(&path))?
                .file_type(),
        )?;
        let file = File::open(&path).map_err(io_error(&path))?;
        check_regular(&path, file.metadata().map_err(io_error(&path))?.file_type())?;
        // SAFETY: the map is read-only and private to this value; like every mmap-based
        // reader, results are unspecified if another process truncates or rewrites the file
        // while it is open.
        let map = unsafe { Mmap::map(&file) }.map_err(io_error(&path))?;
        Self::parse(path, map)
    }

    /// Parse the mapped bytes of `path`.
    fn parse(path: String, map: Mmap) -> Result<GgufFile> {
        let file_len = map.len() as u64;
        let mut cur = Cursor::new(&map, &path);
        let head = header::parse(&mut cur)?;
        let metadata = metadata::parse(&mut cur, head.metadata_count)?;
        let tensors = tensors::parse(&mut cur, head.tensor_count)?;
        let alignment = metadata.alignment()?;
        let data_offset = cur.pos().next_multiple_of(alignment);
        tensors::validate_spans(&path, &tensors, data_offset, alignment, file_len)?;
        let by_name = tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Ok(GgufFile {
            version: head.version,
            path,
            map,
            metadata,
            alignment,
            data_offset,
            tensors,
            by_name,
        })
    }

    /// Let the kernel drop the pages of the memory map read so far (they count in the process's
    /// resident set until it does); later reads page them in again from the file. Linux only
    /// (elsewhere a no-op); the map stays valid either way.
    pub fn release_pages(&self) {
        #[cfg(target_os = "linux")]
        // SAFETY: the map is a read-only private file mapping that nothing writes to, so
        // MADV_DONTNEED only discards clean pages, which reads fault back in from the file
        // unchanged; no reference into the map is invalidated.
        unsafe {
            let _ = self
                .map
                .unchecked_advise(memmap2::UncheckedAdvice::DontNeed);
        }
    }

    /// [`GgufFile::release_pages`] for the pages holding `tensor`'s bytes only (those of its
    /// neighbours sharing the first or last page go too; they read back in unchanged). A
    /// tensor of another file is ignored.
    pub fn release_tensor_pages(&self, tensor: &Tensor<'_>) {
        let (base, data) = (self.map.as_ptr() as usize, tensor.data);
        let Some(offset) = (data.as_ptr() as usize).checked_sub(base) else {
            return;
        };
        if offset
            .checked_add(data.len())
            .is_none_or(|end| end > self.map.len())
        {
            return;
        }
        #[cfg(target_os = "linux")]
        // SAFETY: as in `release_pages`; the range was just checked to lie inside the map.
        unsafe {
            let _ = self.map.unchecked_advise_range(
                memmap2::UncheckedAdvice::DontNeed,
                offset,
                data.len(),
            );
        }
    }

    /// The path the file was opened with (as errors print it).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// All metadata, with typed accessors.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// All metadata, to drop what the caller has consumed (see [`Metadata::remove`]).
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.metadata
    }

    /// Data-section alignment in bytes.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Byte offset of the data section (tensor offsets are relative to it).
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Every tensor info, in file order.
    pub fn tensor_infos(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// `general.architecture` as a known model family, or `UnknownArchitecture` naming it.
    pub fn architecture(&self) -> Result<Architecture> {
        let name = self.metadata.get_str(Architecture::KEY)?;
        Architecture::from_name(name).ok_or_else(|| GgufError::UnknownArchitecture {
            path: self.path.clone(),
            arch: name.to_string(),
            known: Architecture::ALL.map(Architecture::name).join(", "),
        })
    }

    /// The tensor called `name`, or `MissingTensor`.
    pub fn tensor(&self, name: &str) -> Result<Tensor<'_>> {
        let info = self
            .by_name
            .get(name)
            .map(|&i| &self.tensors[i])
            .ok_or_else(|| GgufError::MissingTensor {
                path: self.path.clone(),
                tensor: name.to_string(),
            })?;
        // In range and within usize: `validate_spans` checked end <= the mapped length.
        let start = (self.data_offset + info.offset) as usize;
        Ok(Tensor {
            path: &self.path,
            info,
            data: &self.map[start..start + info.n_bytes as usize],
        })
    }
}

impl<'a> Tensor<'a> {
    /// Name, dims, type, offset and counts.
    pub fn info(&self) -> &'a TensorInfo {
        self.info
    }

    /// The raw stored bytes (a slice of the memory map).
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// All elements as f32 in ggml order (`dims[0]` fastest, i.e. row-major over
    /// [`TensorInfo::shape`]); `UnsupportedQuantType` for types without a kernel.
    /// An impossible allocation is `OutOfMemory`, not an abort.
    pub fn dequantize(&self) -> Result<Vec<f32>> {
        let n = self.info.n_elements;
        let oom = || GgufError::OutOfMemory {
            path: self.path.into(),
            tensor: self.info.name.clone(),
            elements: n,
        };
        let mut out = Vec::new();
        out.try_reserve_exact(usize::try_from(n).map_err(|_| oom())?)
            .map_err(|_| oom())?;
        out.resize(n as usize, 0f32);
        self.dequantize_into(&mut out)?;
        Ok(out)
    }

    /// [`Tensor::dequantize`] into `out`, which must hold exactly `n_elements` values.
    pub fn dequantize_into(&self, out: &mut [f32]) -> Result<()> {
        let ty = self.info.ggml_type;
        let kernel = quant::kernel(ty).ok_or_else(|| GgufError::UnsupportedQuantType {
            path: self.path.into(),
            tensor: self.info.name.clone(),
            type_name: ty.name(),
            type_id: ty as u32,
        })?;
        if out.len() as u64 != self.info.n_elements {
            return Err(GgufError::BufferLength {
                path: self.path.into(),
                tensor: self.info.name.clone(),
                expected: self.info.n_elements as usize,
                actual: out.len(),
            });
        }
        kernel(self.data, out);
        Ok(())
    }
}
