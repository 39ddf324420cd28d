//! [`Extensions`]: values of any type attached to a request, by type.
//!
//! Middleware puts what it learned (the authenticated user, a request id)
//! here, and handlers take it out with the [`Extension`](crate::extract::Extension)
//! extractor. A leaf: it knows nothing of requests.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;

/// A map from type to one value of that type.
#[derive(Default)]
pub struct Extensions {
    map: HashMap<TypeId, Box<dyn Any>>,
}

impl Extensions {
    /// An empty map (allocates nothing until the first insert).
    pub fn new() -> Extensions {
        Extensions::default()
    }

    /// Stores `value`, returning the value of the same type it replaces.
    pub fn insert<T: 'static>(&mut self, value: T) -> Option<T> {
        self.map.insert(TypeId::of::<T>(), Box::new(value)).and_then(|old| old.downcast().ok().map(|b| *b))
    }

    /// The value of type `T`, if any.
    pub fn get<T: 'static>(&self) -> Option<&T> {
        self.map.get(&TypeId::of::<T>()).and_then(|b| b.downcast_ref())
    }

    /// Removes and returns the value of type `T`.
    pub fn remove<T: 'static>(&mut self) -> Option<T> {
        self.map.remove(&TypeId::of::<T>()).and_then(|b| b.downcast().ok().map(|b| *b))
    }

    /// Whether the map holds nothing.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extensions").field("len", &self.map.len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_per_type() {
        let mut e = Extensions::new();
        assert!(e.is_empty());
        assert_eq!(e.insert(5u32), None);
        assert_eq!(e.insert(7u32), Some(5));
        e.insert("user");
        assert_eq!(e.get::<u32>(), Some(&7));
        assert_eq!(e.get::<&str>(), Some(&"user"));
        assert_eq!(e.remove::<u32>(), Some(7));
        assert_eq!(e.get::<u32>(), None);
        assert_eq!(e.get::<u64>(), None);
    }
}
