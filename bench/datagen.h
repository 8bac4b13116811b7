/* datagen.h: the `vitbench datagen` command (the generator itself is
 * vb_datagen, data.h).
 *
 *   vitbench datagen --output_dir DIR [--years N] [--valid_years N]
 *                    [--samples_per_year T] [--channels C] [--img_size H,W] [--seed S]
 * Flags as core/config/cli.h parses them; bad input exits 2 naming the flag.
 */
#ifndef VB_DATAGEN_H
#define VB_DATAGEN_H

/* argv[0] is "datagen". Returns the exit status (0); bad input exits 2. */
int vb_datagen_main(int argc, char **argv);

#endif
