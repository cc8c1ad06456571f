// Command capgate-plugin-booking is the booking plugin: bookable resources
// (rooms, desks, courts, …) and their time slots, with the capabilities
// booking.resources, booking.availability, booking.list, booking.get,
// booking.create and booking.cancel, all in the booking pack.
//
// The host starts it; its data lives in <data_dir>/booking.db (SQLite).
// Config block:
//
//	config:
//	  seed: demo   # on first start, load demo resources and bookings
package main
