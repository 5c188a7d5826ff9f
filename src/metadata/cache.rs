//! A shard's metadata cache (Redpanda's `metadata_cache`, Kafka's `MetadataCache`): the latest
//! [`MetadataImage`] published to this shard. Owned by the shard's thread; the services that
//! read metadata (handlers, the replica manager, group routing) hold an `Rc` of it and read
//! one image per decision, so a decision never mixes two publications.

use std::cell::RefCell;
use std::sync::Arc;

use super::image::MetadataImage;

#[derive(Debug, Default)]
pub struct MetadataCache {
    image: RefCell<Arc<MetadataImage>>,
}

impl MetadataCache {
    pub fn new(image: MetadataImage) -> MetadataCache {
        MetadataCache {
            image: RefCell::new(Arc::new(image)),
        }
    }

    /// A cache holding `image`, shared with whoever else holds it.
    pub fn new_shared(image: Arc<MetadataImage>) -> MetadataCache {
        MetadataCache {
            image: RefCell::new(image),
        }
    }

    /// The image as published last.
    pub fn get(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.image.borrow())
    }

    /// Takes `image` unless it is older than the one held (publications may reach a shard out
    /// of order: each is handled by its own task). Returns whether it was taken.
    pub fn publish(&self, image: Arc<MetadataImage>) -> bool {
        let mut held = self.image.borrow_mut();
        if image.version < held.version {
            return false;
        }
        *held = image;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_image_is_not_taken() {
        let cache = MetadataCache::new(MetadataImage::empty("c".into()));
        let mut newer = MetadataImage::empty("c".into());
        newer.version = 3;
        assert!(cache.publish(Arc::new(newer)));
        let mut older = MetadataImage::empty("other".into());
        older.version = 2;
        assert!(!cache.publish(Arc::new(older)));
        assert_eq!(
            (cache.get().version, cache.get().cluster_id.as_str()),
            (3, "c")
        );
    }
}
