//! peregrine

pub mod db;
