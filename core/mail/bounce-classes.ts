/** The bounce classes are a column type of the message rows; db/ owns them, core names them from here. */
export { BOUNCE_CLASSES, type BounceClass } from '../../db/schema/bounce-classes.js';
